"""The end of a run: its ``end`` row and summary, then compaction, drift against the previous
epoch and the views file (none of which can fail the run; most of the compaction and the views
file ran in the run's tail: flows/tidy.py)."""

import contextlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import duckdb
from prefect.states import Completed, Failed, State

from needlescope.config import SweepConfig
from needlescope.flows.model_sweep import ModelSweep
from needlescope.flows.run_cells import Plan
from needlescope.flows.run_gates import judge_and_alert
from needlescope.flows.tidy import Tidied, compacted, log_tidied
from needlescope.warehouse.store import Warehouse, rows


def finish_run(
    config: SweepConfig,
    store: Warehouse,
    run_id: str,
    epoch: str,
    plan: Plan,
    sweeps: list[ModelSweep],
    only_context: bool,
    logger: Any,
    flow_run_id: str | None,
    tidied: Tidied | None = None,
) -> State:
    """The run's ``end`` row and summary; compaction, drift, the gates (a shard's run judges
    none) and the views file after it. ``tidied``: the upkeep done in the run's tail."""
    summary = run_summary(run_id, epoch, store, plan, sweeps, only_context)
    notes = []
    if unsent := summary["cells_unsent"]:
        notes.append(f"budget spent: {unsent} cells left unsent")
    if elsewhere := summary["cells_graded_elsewhere"]:
        notes.append(f"{elsewhere} cells graded by another run of the epoch meanwhile (skipped)")
    if "nothing_measured" in summary:
        notes.append(f"nothing measured: {summary['nothing_measured']}")
    if waiting := summary["batches_waiting"]:
        notes.append(waiting_note(waiting, summary["cells_in_batches"]))
    counts = {
        k: summary[k]
        for k in (
            "cells_total",
            "cells_skipped",
            "cells_dropped",
            "cells_graded",
            "cells_failed",
            "cells_unsent",
            "spent_tokens",
            "spent_usd",
        )
    }
    end = rows.run_row(
        run_id,
        epoch,
        config,
        "end",
        flow_run_id=flow_run_id,
        note="; ".join(notes) or None,
        **counts,
    )
    store.append("runs", [end])
    if unsent:
        logger.warning("budget spent: %d cells left unsent for a later run", unsent)
    gate_failed = after_end(
        config, store, epoch, summary, plan.whole_epoch and not only_context, logger, tidied
    )
    return final_state(summary, gate_failed)


def after_end(
    config: SweepConfig,
    store: Warehouse,
    epoch: str,
    summary: dict[str, Any],
    judge: bool,
    logger: Any,
    tidied: Tidied | None = None,
) -> str | None:
    """Compaction, then drift and (``judge``) the gates into ``summary``, the views file
    refreshed meanwhile unless ``tidied`` refreshed it and nothing was merged since; the
    failed gate's message, or None."""
    if tidied is not None:
        log_tidied(tidied, logger)
    gate_failed = None
    # Drift and the gates read a snapshot, made while compaction runs: after the tail's pass
    # (or with compact: false) it holds few files, and the same rows whatever it merges. The
    # views file needs the merged files: it is refreshed after, while drift and the gates run
    # (DuckDB works outside the GIL), and the run ends when both are done.
    with ThreadPoolExecutor(2) as pool:
        opening = pool.submit(open_reader, store)
        final = compacted(store) if config.compact else Tidied()
        log_tidied(final, logger)
        refresh = tidied is None or not tidied.views_refreshed or final.merged
        refreshed = pool.submit(store.refresh_views_file) if refresh else None
        with shared_reader(store, opening) as con:
            summary["drift"] = epoch_drift(store, epoch, config.seed, logger, con)
            if judge:
                gate_failed = judge_and_alert(config, store, epoch, summary, logger, con)
    if refreshed is not None and not refreshed.result():
        logger.warning("%s is open elsewhere; its views were not refreshed", store.db_path)
    return gate_failed


def final_state(summary: dict[str, Any], gate_failed: str | None) -> State:
    """Failed, naming the first failed gate, else the failed cells, else nothing measured."""
    message = state_message(summary)
    if gate_failed:
        also = f"; {summary['cells_failed']} cells failed" if summary["cells_failed"] else ""
        return Failed(message=f"{gate_failed}{also}", data=summary)
    if summary["cells_failed"]:
        return Failed(message=f"{summary['cells_failed']} cells failed: {message}", data=summary)
    if "nothing_measured" in summary:
        return Failed(message=f"nothing measured: {message}", data=summary)
    if waiting := summary.get("batches_waiting"):
        note = waiting_note(waiting, summary["cells_in_batches"])
        return Completed(name="AwaitingBatches", message=f"{note}: {message}", data=summary)
    return Completed(message=message, data=summary)


def waiting_note(batches: int, cells: int) -> str:
    return (
        f"waiting on {batches} batches ({cells} cells): the next run of the config, or"
        " `needlescope rerun RUN_ID`, collects them without sending them again"
    )


def state_message(summary: dict[str, Any]) -> str:
    """The final state's message, which Prefect logs: one line, not the whole summary (the
    command line prints the result on stdout; the summary is the state's data)."""
    return (
        f"run {summary['run_id']}, epoch {summary['epoch']}: {summary['cells_graded']} cells"
        f" graded, {summary['cells_skipped']} skipped, {summary['cells_failed']} failed"
    )


def run_summary(
    run_id: str,
    epoch: str,
    store: Warehouse,
    plan: Plan,
    sweeps: list[ModelSweep],
    only_context: bool,
) -> dict[str, Any]:
    dropped = plan.window_dropped + sum(s.dropped for s in sweeps)
    elsewhere = sum(s.elsewhere for s in sweeps)
    spend = sweeps[0].asker.spend if sweeps else None
    summary: dict[str, Any] = {
        "run_id": run_id,
        "epoch": epoch,
        "warehouse": str(store.root),
        "cells_total": len(plan.cells),
        "cells_dropped": dropped,
        "cells_skipped": len(plan.kept) - len(plan.todo) + elsewhere,
        "cells_graded": sum(s.graded for s in sweeps),
        "cells_failed": sum(s.failed for s in sweeps),
        "cells_unsent": sum(s.unsent for s in sweeps),
        "cells_graded_elsewhere": elsewhere,
        # Provider batches still open as the run ended, and the cells they (or batches
        # another run collects) answer: the next run of their models collects them.
        "batches_waiting": sum(s.waiting_batches for s in sweeps),
        "cells_in_batches": sum(s.in_batches for s in sweeps),
        "spent_tokens": spend.tokens if spend else 0,
        "spent_usd": round(spend.usd, 6) if spend else 0.0,
        "only_context": only_context,
    }
    if plan.cells and dropped == len(plan.cells):
        reasons = []
        if plan.window_dropped:
            reasons.append(f"{plan.window_dropped} longer than their model's context window")
        reasons += [r for s in sweeps for r in s.drop_reasons][:1]
        summary["nothing_measured"] = (
            f"all {len(plan.cells)} cells were dropped ({'; e.g. '.join(reasons)})"
        )
    return summary


def open_reader(store: Warehouse) -> duckdb.DuckDBPyConnection | None:
    """A connection with the views (creating them reads every file's footer), or None when
    the warehouse cannot be read."""
    try:
        return store.connect()
    except Exception:
        return None


@contextlib.contextmanager
def shared_reader(
    store: Warehouse, opening: Future[duckdb.DuckDBPyConnection | None] | None = None
) -> Iterator[duckdb.DuckDBPyConnection | None]:
    """One connection with the views for the run's end (``opening``'s, else opened now), or
    None when the warehouse cannot be read: each step then connects, and reports its
    failure, itself."""
    con = opening.result() if opening is not None else open_reader(store)
    try:
        yield con
    finally:
        if con is not None:
            con.close()


def epoch_drift(
    store: Warehouse,
    epoch: str,
    seed: int,
    logger: Any,
    con: duckdb.DuckDBPyConnection | None = None,
) -> list[dict[str, Any]] | None:
    """Each model's recall accuracy against its previous epoch on the same cells; a change
    whose paired bootstrap 95% interval excludes zero is flagged. Never fails the sweep.
    ``con``: a connection with the views to read (else one of its own)."""
    from needlescope.warehouse.stats.drift import drift_summary

    try:
        with store.reading(con) as reader:
            drift = drift_summary(reader, epoch, seed)
    except Exception as exc:  # the answers are stored; a failed comparison only loses a note
        logger.warning("drift against the previous epoch not computed: %s", exc)
        return None
    for entry in drift:
        if entry["drift"]:
            logger.warning(
                "drift: %s mean accuracy %.1f -> %.1f (%+.1f, 95%% interval %+.1f to %+.1f) "
                "against epoch %s on %d paired answers",
                entry["model"],
                entry["mean_previous"],
                entry["mean_now"],
                entry["diff"],
                entry["lo"],
                entry["hi"],
                entry["previous"],
                entry["n_pairs"],
            )
    return drift
