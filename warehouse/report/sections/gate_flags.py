"""Failed regression gates as the Summary's flags: each probe's latest epoch judged again with
the gates of the config it was swept with (as `needlescope gates` does), sending nothing."""

from __future__ import annotations

import duckdb
from pydantic import ValidationError

from needlescope.config import SweepConfig
from needlescope.warehouse.report.sections.statistics import latest_epoch, result_probes
from needlescope.warehouse.stats.gates import evaluate_epoch

ANCHOR = "statistics"  # the section whose drift tables stand beside the gates' figures


def epoch_config(con: duckdb.DuckDBPyConnection, epoch: str) -> SweepConfig | None:
    row = con.execute(
        "SELECT config_json FROM runs WHERE epoch = $epoch AND config_json IS NOT NULL"
        " ORDER BY started_at DESC LIMIT 1",
        {"epoch": epoch},
    ).fetchone()
    if row is None:
        return None
    try:
        return SweepConfig.model_validate_json(row[0])
    except ValidationError:  # a config an older needlescope stored, no longer readable
        return None


def gate_flags(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], list[tuple[str, str]]]:
    probes = result_probes(con)
    epochs = {e for p in probes if (e := latest_epoch(con, p)) is not None}
    flags: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for epoch in sorted(epochs):
        config = epoch_config(con, epoch)
        if config is None or not config.gates:
            continue
        present = con.execute(
            "SELECT DISTINCT model, probe FROM results WHERE epoch = $epoch", {"epoch": epoch}
        ).fetchall()
        for result in evaluate_epoch(con, config.gates, epoch, seed=config.seed):
            if not result.failed:
                continue
            for model, probe in present:
                if model == result.model and result.probe in (None, probe):
                    text = f"gate {result.gate} failed"
                    flags.setdefault((model, probe), []).append((text, ANCHOR))
    return flags
