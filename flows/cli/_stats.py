"""``needlescope stats``: each probe's effective context length both ways (RULER's absolute
rule, NoLiMa's relative one), each with its interval from the bootstrap (a fast path: Prefect
is never imported). A command runs past 60 lines by its options alone."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from needlescope.errors import NeedlescopeError
from needlescope.flows.cli._common import WarehouseOption, fail


def stats(
    warehouse: WarehouseOption = None,
    probe: Annotated[
        list[str] | None,
        typer.Option(help="A probe to report (repeatable; default: every probe answered)."),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            min=0.0,
            max=100.0,
            help="RULER's rule: the longest length whose mean score is at least this, there "
            "and at every shorter length (default: 85.6, RULER's, for niah, variable_tracking "
            "and aggregation; 85 for the seed probes).",
        ),
    ] = None,
    epoch: Annotated[str | None, typer.Option(help="One epoch (default: all pooled).")] = None,
    seed: Annotated[int, typer.Option(help="The bootstrap's seed.")] = 0,
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Effective context length per model, by RULER's rule and NoLiMa's, with intervals."""
    import duckdb
    import polars as pl

    from needlescope.warehouse.stats.effective import effective_both
    from needlescope.warehouse.store import Warehouse, default_root

    if output_format not in ("table", "json"):
        raise fail(f"--format must be table or json, not {output_format!r}")
    store = Warehouse(warehouse or default_root())
    if not store.exists():
        raise fail(f"no warehouse at {store.root}")
    try:
        con = store.connect()
        try:
            answered = [r[0] for r in con.sql("SELECT DISTINCT probe FROM results").fetchall()]
            chosen = probe or sorted(answered)
            frames = [
                effective_both(con, probe=name, epoch=epoch, threshold=threshold, seed=seed)
                for name in chosen
            ]
        finally:
            con.close()
    except (NeedlescopeError, duckdb.Error, ValueError) as exc:
        raise fail(str(exc).strip().splitlines()[0]) from None
    frame = pl.concat(frames) if frames else pl.DataFrame()
    if output_format == "json":
        sys.stdout.write(json.dumps(frame.to_dicts(), ensure_ascii=False) + "\n")
        return
    with pl.Config(tbl_rows=200, tbl_cols=40, fmt_str_lengths=40, tbl_width_chars=240):
        sys.stdout.write(str(frame) + "\n")
