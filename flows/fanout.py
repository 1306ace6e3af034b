"""One sweep split into shard flow runs of its own deployment, shared by a work pool's workers.

Every shard writes the same warehouse (one new Parquet file per write, so writers never meet);
the coordinating run waits for them and sums what their `end` rows say.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prefect import get_run_logger
from prefect.deployments.flow_runs import arun_deployment
from prefect.runtime import deployment, flow_run
from prefect.states import Completed, Failed, State

from needlescope.config import SweepConfig
from needlescope.errors import ConfigError
from needlescope.flows.run_gates import judge_and_alert
from needlescope.warehouse.store import Warehouse

COUNTS = (
    "cells_total",
    "cells_dropped",
    "cells_skipped",
    "cells_graded",
    "cells_failed",
    "cells_unsent",
    "spent_tokens",
    "spent_usd",
)


async def fan_out(
    config_path: str,
    epoch: str,
    store: Warehouse,
    only_context: bool,
    shards: int,
    config: SweepConfig | None = None,
) -> State:
    """The shard runs of ``epoch`` (resolved by the sweep flow, so shards that start after
    midnight still sweep the same epoch), waited for and summed; ``config``'s gates judged
    on the whole epoch once they are done (a shard judges none: it sees only its part)."""
    if deployment.id is None:
        raise ConfigError(
            "shards > 1 splits a sweep across a work pool's workers: run it from a deployment "
            "(needlescope deploy CONFIG --pool POOL --shards N), not directly"
        )
    logger = get_run_logger()
    parameters = {
        "config_path": config_path,
        "epoch": epoch,
        "warehouse": str(store.root),
        "only_context": only_context,
        "shards": shards,
    }
    logger.info(
        "epoch %s split into %d shard runs of deployment %s", epoch, shards, deployment.name
    )
    runs = await asyncio.gather(
        *(
            arun_deployment(
                deployment.id,
                parameters={**parameters, "shard": index},
                flow_run_name=f"{flow_run.name}-shard-{index + 1}-of-{shards}",
                timeout=None,
                poll_interval=2,
                # A retry of this run (run_count + 1) starts fresh shards, a crash-restart of
                # the same attempt finds the ones it already started.
                idempotency_key=f"{flow_run.id}:{flow_run.run_count}:{index}",
            )
            for index in range(shards)
        )
    )
    summary: dict[str, Any] = {
        "epoch": epoch,
        "warehouse": str(store.root),
        "shards": shards,
        "shard_flow_runs": [str(run.id) for run in runs],
        **shard_totals(store, [str(run.id) for run in runs]),
        "only_context": only_context,
    }
    unfinished = [run.name for run in runs if not (run.state and run.state.is_completed())]
    gate_failed = None
    if config is not None and not only_context:
        gate_failed = judge_and_alert(config, store, epoch, summary, logger)
    return _outcome(summary, unfinished, gate_failed, shards)


def _outcome(
    summary: dict[str, Any], unfinished: list[str], gate_failed: str | None, shards: int
) -> State:
    if gate_failed:
        return Failed(message=gate_failed, data=summary)
    if unfinished or summary["cells_failed"]:
        return Failed(
            message=f"{summary['cells_failed']} cells failed; shard runs not completed: "
            f"{', '.join(unfinished) or 'none'}",
            data=summary,
        )
    return Completed(message=f"{shards} shards completed", data=summary)


def shard_totals(store: Warehouse, flow_run_ids: list[str]) -> dict[str, Any]:
    """The shards' counts from their `end` rows in the warehouse, the source of truth."""
    marks = ", ".join("?" for _ in flow_run_ids)
    row = store.query_table(
        "runs",
        "SELECT " + ", ".join(f"coalesce(sum({c}), 0)" for c in COUNTS) + " FROM t "
        f"WHERE event = 'end' AND flow_run_id IN ({marks})",
        flow_run_ids,
    )[0]
    return dict(zip(COUNTS, row, strict=True))
