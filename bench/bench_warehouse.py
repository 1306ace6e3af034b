"""Warehouse at scale: 1,000,000 recall results and ~40,000,000 needle outcomes in Parquet.

Generates a warehouse with the real schemas, folder layout and file writer, vectorised with
Polars, and caches it under ``bench/.cache/`` (``--regen`` rebuilds it); then times the figure
queries, ``needlescope report`` and ``write_report``, each in a fresh process with its peak RSS.
The grid, the layouts (``year`` too), the method and the figures: bench/README.md.

    python bench/bench_warehouse.py [--layout batched|sweep|compacted] [--epochs 50] [--no-report]

Design: docs/design/benchmarks.md#bench-warehouse
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from needlescope.warehouse.store import rollups
from needlescope.warehouse.store.compaction import COMPACTED, ROW_GROUP_ROWS
from needlescope.warehouse.store.parquet import Warehouse, slug
from needlescope.warehouse.store.schema import SCHEMA_VERSION, TABLES

VERSION = "1"  # bump when the generator changes: the cached warehouse is rebuilt
HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
PYTHON = sys.executable
NEEDLESCOPE = str(Path(sys.executable).with_name("needlescope"))

MODELS = ("gpt-4o-mini", "claude-3-5-haiku", "gemini-2.0-flash", "qwen2.5-7b", "llama-3.1-8b")
SKILL = (0.97, 0.95, 0.93, 0.88, 0.84)  # in-order recall at the shortest length
LENGTHS = (1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 512000)
NEEDLE_COUNTS = (20, 40, 50, 60)
FILLERS = ("pattern", "noise", "prose-en", "prose-zh")
REPEATS = 25
EPOCHS = 50
# --layout year: 500 epochs in 7 files per table folder, as compaction leaves a folder between
# its full merges (it merges a folder's compacted files again past 8 of them)
EPOCHS_PER_FILE = 72
SEED = 7
PROMPT = "recall-en-v1"
START = datetime(2026, 9, 1, 3, 0, tzinfo=UTC)
ERROR_KINDS = ("timeout", "rate_limit", "server_error")
CELLS = len(MODELS) * len(LENGTHS) * len(NEEDLE_COUNTS) * len(FILLERS) * REPEATS
PER_MODEL = CELLS // len(MODELS)
TS = pl.Datetime("us", "UTC")

# Everything random is a hash of a row's unique id and a salt: vectorised, reproducible, and
# needs nothing but Polars (numpy is not a dependency of needlescope).


def uniform(uid: str | pl.Expr, salt: int) -> pl.Expr:
    """A uniform float in [0, 1) per row, from the row's integer id."""
    col = pl.col(uid) if isinstance(uid, str) else uid
    return (col.hash(seed=SEED * 1000 + salt) // 2048).cast(pl.Float64) / 2.0**53


def poisson(u: pl.Expr, lam: pl.Expr, top: int = 6) -> pl.Expr:
    """Inverse-CDF Poisson draw for small rates (lam < 1)."""
    total = pl.lit(0, pl.Int64)
    cdf = pl.lit(0.0)
    for k in range(top):
        cdf = cdf + (-lam).exp() * lam.pow(k) / math.factorial(k)
        total = total + (u > cdf).cast(pl.Int64)
    return total


def _lookup(name: str, values: tuple[object, ...], index: str) -> pl.DataFrame:
    return pl.DataFrame({index: list(range(len(values))), name: list(values)})


def _hex(frame: pl.DataFrame, column: str, salt: int) -> pl.Series:
    """16 hex digits per row, like needlescope's cell and context ids (20,000 values)."""
    ints = frame.select(pl.col(column).hash(seed=salt))[column].to_list()
    return pl.Series([f"{x:016x}" for x in ints], dtype=pl.String)


def make_grid() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The 20,000 cells (all models) and their needles, one row per (cell, needle index)."""
    grid = (
        _lookup("model", MODELS, "m")
        .with_columns(skill=pl.Series(SKILL))
        .join(_lookup("length", LENGTHS, "li"), how="cross")
        .join(_lookup("needle_count", NEEDLE_COUNTS, "ni"), how="cross")
        .join(_lookup("filler", FILLERS, "fi"), how="cross")
        .join(pl.DataFrame({"repeat": list(range(REPEATS))}), how="cross")
        .with_row_index("cell_index")
        .with_columns(
            # the context: everything but the model, so every model sees the same needles
            ctx=((pl.col("li") * len(NEEDLE_COUNTS) + pl.col("ni")) * len(FILLERS) + pl.col("fi"))
            * REPEATS
            + pl.col("repeat"),
            row=pl.col("cell_index") % PER_MODEL,
        )
        .with_columns(pl.col(pl.UInt32).cast(pl.Int64))
    )
    grid = grid.with_columns(
        cell_id=_hex(grid, "cell_index", 101), context_id=_hex(grid, "ctx", 102)
    )
    needles = (
        grid.select("cell_index", "m", "row", "ctx", "needle_count", "length")
        .with_columns(needle_index=pl.int_ranges(1, pl.col("needle_count") + 1))
        .explode("needle_index")
        .with_columns(
            expected=1000 + (pl.col("ctx") * 64 + pl.col("needle_index")).hash(seed=103) % 9000,
            fraction=(
                (pl.col("needle_index") - 1) / (pl.col("needle_count") - 1).clip(1, None)
            ).round(4),
        )
        .with_columns(pl.col("expected").cast(pl.Int64))
    )
    return grid, needles


def cells_table(grid: pl.DataFrame, needles: pl.DataFrame, run_id: str) -> pa.Table:
    """The cells rows of one model (written once: later epochs reuse the same cells)."""
    lists = needles.group_by("cell_index", maintain_order=True).agg(
        pl.format("[{}]", pl.col("expected").cast(pl.String).str.join(", ")).alias("expected"),
        pl.format("[{}]", pl.col("fraction").cast(pl.String).str.join(", ")).alias("fractions"),
        pl.format(
            "[{}]",
            (pl.col("fraction") * pl.col("length") * 3.9)
            .cast(pl.Int64)
            .cast(pl.String)
            .str.join(", "),
        ).alias("offsets"),
    )
    frame = grid.join(lists, on="cell_index").select(
        pl.lit(SCHEMA_VERSION, pl.Int32).alias("schema_version"),
        "cell_id",
        "context_id",
        pl.lit(run_id).alias("run_id"),
        pl.lit(START, TS).alias("created_at"),
        "model",
        pl.format('{{"model":"{}","name":"{}","provider":"openai"}}', "model", "model").alias(
            "model_identity"
        ),
        pl.lit('{"extra":{},"max_tokens":null,"seed":null,"temperature":0.0,"top_p":null}').alias(
            "generation"
        ),
        pl.lit("recall").alias("probe"),
        pl.lit('{"digits":4,"snap":"auto"}').alias("probe_params"),
        "filler",
        pl.format('{{"kind":"builtin","name":"{}"}}', "filler").alias("filler_spec"),
        pl.lit("even").alias("placement"),
        pl.lit("whole").alias("region"),
        pl.lit(PROMPT).alias("prompt_version"),
        pl.lit(SEED, pl.Int64).alias("seed"),
        "length",
        pl.lit("tokens").alias("length_unit"),
        "needle_count",
        "repeat",
        (pl.col("length") * 3.9).cast(pl.Int64).alias("filler_chars"),
        (pl.col("length") * 4).alias("prompt_length"),
        (pl.col("length") - 90 - 6 * pl.col("needle_count")).alias("haystack_length"),
        pl.col("length").alias("planned_tokens"),
        (pl.col("needle_count") * 12 + 32).alias("max_tokens"),
        pl.concat_str(["cell_id", "context_id", "context_id", "cell_id"]).alias("prompt_sha256"),
        "expected",
        pl.col("fractions").alias("needle_fractions"),
        pl.col("offsets").alias("needle_offsets"),
        pl.lit(None, pl.String).alias("prompt_text"),
        pl.lit("{}").alias("facts"),
        pl.lit("tokenizer").alias("length_basis"),
        "row",
    )
    return frame


def epoch_name(e: int) -> str:
    return f"nightly-{(START + timedelta(days=e)).date().isoformat()}"


def run_ids(e: int) -> tuple[str, str]:
    day = START + timedelta(days=e)
    return (f"{day:%Y%m%dT%H%M%S}Z-{e:04x}a1b2", f"{day:%Y%m%dT%H%M%S}Z-{e:04x}c3d4")


def make_chunk(
    grid: pl.DataFrame, needles: pl.DataFrame, m: int, e: int
) -> dict[str, pl.DataFrame]:
    """Answers, needle outcomes, hallucinations and duplicates of model m in epoch e.

    Every frame keeps ``row`` (the cell's place among the model's cells) for slicing into files.
    """
    epoch = epoch_name(e)
    run, rerun = run_ids(e)
    at0 = START + timedelta(days=e, minutes=5 + 40 * m)
    key = [
        pl.lit(SCHEMA_VERSION, pl.Int32).alias("schema_version"),
        "run_id",
        pl.lit(epoch).alias("epoch"),
        "cell_id",
        "model",
        pl.lit("recall").alias("probe"),
    ]
    cells = grid.filter(pl.col("m") == m).with_columns(
        uid=pl.col("cell_index") + e * CELLS, run_id=pl.lit(run)
    )
    li = pl.col("li").cast(pl.Float64)
    cells = cells.with_columns(
        status=uniform("uid", 1),
        double=uniform("uid", 2) < 0.0005,  # a racing second graded answer: results ignores it
        parse_fail=uniform("uid", 3) < 0.02 + 0.08 * li / 9,
        hallucinated=poisson(uniform("uid", 4), 0.1 + 0.5 * li / 9),
        duplicated=poisson(uniform("uid", 5), pl.lit(0.05)),
        answered_at=pl.lit(at0, TS)
        + pl.duration(seconds=(uniform("uid", 6) * 3600).cast(pl.Int64)),
        latency_s=(-(uniform("uid", 7).log() + uniform("uid", 8).log()) * (0.4 + 0.25 * li))
        .clip(0.05, None)
        .round(3),
        prompt_tokens=pl.col("length") + (uniform("uid", 9) * 7).cast(pl.Int64) - 3,
    ).with_columns(
        final_error=pl.col("status") < 0.003,  # no graded answer in this epoch
        retried=(pl.col("status") >= 0.003) & (pl.col("status") < 0.023),  # failed, then graded
    )
    cells = cells.with_columns(parsed=~pl.col("final_error") & ~pl.col("parse_fail"))
    # Per needle: in order (in the LCS) with a probability that falls with length and dips in
    # the middle of the context ("lost in the middle"); else misordered (30%) or missing.
    long = (
        needles.filter(pl.col("m") == m)
        .join(cells.select("cell_index", "uid", "li", "skill"), on="cell_index")
        .with_columns(nid=pl.col("uid") * 64 + pl.col("needle_index"))
    )
    pos = (pl.col("needle_index") - 0.5) / pl.col("needle_count")
    lcl = pl.col("li").cast(pl.Float64)
    p = pl.col("skill") - 0.035 * lcl - 0.25 * (lcl / 9) * (math.pi * pos).sin()
    long = long.with_columns(in_lcs=uniform("nid", 10) < p).with_columns(
        outcome=pl.when("in_lcs")
        .then(pl.lit("correct"))
        .when(uniform("nid", 11) < 0.3)
        .then(pl.lit("misorder"))
        .otherwise(pl.lit("missing"))
    )
    given = long.filter(pl.col("outcome") != "missing").with_columns(
        k=pl.col("needle_index").cum_count().over("cell_index")
    )
    per_cell = long.group_by("cell_index").agg(
        correct=pl.col("in_lcs").sum().cast(pl.Int64),
        missing=(pl.col("outcome") == "missing").sum().cast(pl.Int64),
        wrong=(pl.col("outcome") == "misorder").sum().cast(pl.Int64),
    )
    texts = given.group_by("cell_index").agg(
        pl.format('"{}": {}', "k", "expected").str.join(",\n  ").alias("pairs"),
        pl.col("expected").cast(pl.String).str.join(", ").alias("values"),
    )
    reply = pl.format("Here are the numbers:\n```json\n{{\n  {}\n}}\n```", "pairs")
    extra = pl.col("hallucinated") + pl.col("duplicated")
    distance = pl.col("missing") + pl.col("wrong") + extra
    longest = pl.max_horizontal("needle_count", pl.col("needle_count") - pl.col("missing") + extra)
    cells = (
        cells.join(per_cell, on="cell_index", how="left")
        .join(texts, on="cell_index", how="left")
        .with_columns(
            response=pl.when("parse_fail")
            .then(reply.str.slice(0, reply.str.len_chars() // 2))
            .otherwise(reply),
            answered=pl.when("parsed").then(pl.format("[{}]", "values")),
            accuracy=pl.when("parsed").then((100 * (1 - distance / longest)).round(4)),
            edit_distance=pl.when("parsed").then(distance),
            extra=pl.when("parsed").then(extra),
            completion_tokens=pl.col("needle_count") * 9 + 12,
        )
        .with_columns(
            *(pl.when("parsed").then(pl.col(c)).alias(c) for c in ("correct", "missing", "wrong"))
        )
    )
    graded_cols = [
        *key,
        "answered_at",
        "response",
        pl.lit(True).alias("response_kept"),
        pl.col("parsed").alias("parse_ok"),
        pl.when("parse_fail")
        .then(pl.lit("no complete JSON object with numeric keys"))
        .alias("parse_error"),
        "accuracy",
        "edit_distance",
        "correct",
        "missing",
        "extra",
        "wrong",
        "answered",
        "prompt_tokens",
        "completion_tokens",
        pl.lit(None, pl.Int64).alias("reasoning_tokens"),
        pl.lit("stop").alias("finish_reason"),
        "latency_s",
        pl.format("{}-2026-08-01", "model").alias("model_version"),
        pl.lit(1, pl.Int64).alias("attempts"),
        pl.lit(None, pl.String).alias("error_kind"),
        pl.lit(None, pl.String).alias("error"),
        pl.lit(None, pl.String).alias("detail"),
        pl.lit(False).alias("truncated"),
        (pl.col("prompt_tokens") * 0.15e-6).round(8).alias("cost_usd"),
        "row",
    ]
    kind = pl.lit(pl.Series(ERROR_KINDS)).get((uniform("uid", 12) * 3).cast(pl.Int64))
    failed = cells.filter(pl.col("final_error") | pl.col("retried")).select(
        *key,
        (pl.col("answered_at") - pl.duration(seconds=90)).alias("answered_at"),
        pl.lit(False).alias("response_kept"),
        pl.lit(1, pl.Int64).alias("attempts"),
        kind.alias("error_kind"),
        pl.format("{}: request failed after 4 attempts", kind).alias("error"),
        pl.lit(False).alias("truncated"),
        "row",
    )
    graded = cells.filter(~pl.col("final_error"))
    doubled = graded.filter("double").with_columns(
        run_id=pl.lit(rerun), answered_at=pl.col("answered_at") - pl.duration(seconds=60)
    )
    answers = pl.concat(
        [
            failed,
            graded.select(graded_cols),
            doubled.select(graded_cols),
        ],
        how="diagonal_relaxed",
    )
    parsed = cells.filter("parsed").select("cell_index", "cell_id", "model")
    outcome_cols = [*key, "needle_index", "expected", "in_lcs", "outcome", "row"]
    outcomes = pl.concat(
        [
            long.join(parsed, on="cell_index")
            .with_columns(run_id=pl.lit(run))
            .select(outcome_cols),
            long.join(parsed.join(doubled.select("cell_index"), on="cell_index"), on="cell_index")
            .with_columns(run_id=pl.lit(rerun))
            .select(outcome_cols),
        ]
    )
    draws = cells.filter("parsed")
    invented = (
        draws.filter(pl.col("hallucinated") > 0)
        .with_columns(j=pl.int_ranges(0, "hallucinated"))
        .explode("j")
        .with_columns(hid=pl.col("uid") * 8 + pl.col("j"))
        .with_columns(key_from=(uniform("hid", 13) * (pl.col("needle_count") + 1)).cast(pl.Int64))
        .select(
            *key,
            (uniform("hid", 14) * pl.col("needle_count")).cast(pl.Int64).alias("answer_index"),
            (1000 + pl.col("hid").hash(seed=15) % 9000).cast(pl.String).alias("value"),
            "key_from",
            (pl.col("key_from") + 1).alias("key_to"),
            "row",
        )
    )
    copies = (
        draws.filter(pl.col("duplicated") > 0)
        .with_columns(j=pl.int_ranges(0, "duplicated"))
        .explode("j")
        .with_columns(hid=pl.col("uid") * 8 + pl.col("j"))
        .with_columns(needle_index=(uniform("hid", 16) * pl.col("needle_count")).cast(pl.Int64) + 1)
        .join(
            long.select("cell_index", "needle_index", "expected"), on=["cell_index", "needle_index"]
        )
        .select(
            *key,
            (pl.col("needle_index") + pl.col("j")).alias("answer_index"),
            pl.col("expected").cast(pl.String).alias("value"),
            pl.format("[{}]", "needle_index").alias("needle_indices"),
            "row",
        )
    )
    return {
        "answers": answers,
        "needle_outcomes": outcomes,
        "hallucinations": invented,
        "duplicates": copies,
    }


def _write(
    store: Warehouse, table: str, frame: pl.DataFrame, model: str, name: str, merged: bool = False
) -> int:
    """``merged``: a file as compaction leaves it, under ``compacted/`` (no manifest: it
    replaced no file of this warehouse)."""
    if frame.height == 0:
        return 0
    schema = TABLES[table]
    # columns later schema steps added, which these rows do not fill (NULL, as in old rows)
    missing = [pl.lit(None).alias(name) for name in schema.names if name not in frame.columns]
    data = frame.with_columns(missing).select(schema.names).to_arrow().cast(schema)
    top = store.root / COMPACTED if merged else store.parquet
    folder = top / table / "recall" / slug(model)
    folder.mkdir(parents=True, exist_ok=True)
    if merged:
        # a merged file as compaction writes it: zstd, row groups DuckDB scans in parallel
        pq.write_table(
            data, folder / f"{name}.parquet", compression="zstd", row_group_size=ROW_GROUP_ROWS
        )
    else:
        store._atomic_write(data, folder / f"{name}.parquet")  # the writer Warehouse.append uses
    return 1


def _write_split(
    store: Warehouse, table: str, frame: pl.DataFrame, model: str, name: str, per_file: int | None
) -> int:
    if per_file is None:
        return _write(store, table, frame, model, name)
    files = 0
    batches = frame.with_columns(batch=pl.col("row") // per_file)
    for (batch,), part in batches.group_by("batch", maintain_order=True):
        files += _write(store, table, part, model, f"{name}-{batch:05d}")
    return files


def runs_table(epochs: int) -> pa.Table:
    config = {
        "name": "nightly",
        "seed": SEED,
        "batch_size": 32,
        "models": [{"name": m, "provider": "openai", "concurrency": 8} for m in MODELS],
        "probes": [
            {
                "probe": "recall",
                "lengths": list(LENGTHS),
                "needle_counts": list(NEEDLE_COUNTS),
                "fillers": list(FILLERS),
                "prompts": [PROMPT],
                "repeats": REPEATS,
            }
        ],
    }
    rows = []
    for e in range(epochs):
        for i, run in enumerate(run_ids(e)):
            start = START + timedelta(days=e, hours=5 * i)
            for event, at in (("start", start), ("end", start + timedelta(hours=4))):
                rows.append(
                    {
                        "schema_version": SCHEMA_VERSION,
                        "run_id": run,
                        "epoch": epoch_name(e),
                        "event": event,
                        "at": at,
                        "config_name": "nightly",
                        "config_json": json.dumps(config),
                        "needlescope_version": "0.1.0",
                        "flow_run_id": f"{e:08x}-0000-4000-8000-{i:012x}",
                        "cells_total": CELLS,
                        "cells_skipped": 0 if i == 0 else CELLS - 60,
                        "cells_dropped": 0,
                        "cells_graded": None if event == "start" else CELLS - 60,
                        "cells_failed": None if event == "start" else 60,
                        "cells_unsent": None if event == "start" else 0,
                        "spent_tokens": None,
                        "spent_usd": None,
                        "note": None,
                    }
                )
    return pa.Table.from_pylist(rows, schema=TABLES["runs"])


def _write_cells(
    store: Warehouse,
    grid: pl.DataFrame,
    needles: pl.DataFrame,
    counts: dict[str, int],
    per_file: int | None,
) -> int:
    """Every model's cells rows, written once (as the first epoch's sweep writes them)."""
    files = 0
    for m, model in enumerate(MODELS):
        cells = cells_table(
            grid.filter(pl.col("m") == m), needles.filter(pl.col("m") == m), run_ids(0)[0]
        )
        counts["cells"] += cells.height
        files += _write_split(store, "cells", cells, model, epoch_name(0), per_file)
    return files


def _write_runs(
    store: Warehouse, epochs: int, counts: dict[str, int], files: int
) -> dict[str, int]:
    runs = runs_table(epochs)
    counts["runs"] = runs.num_rows
    store._atomic_write(runs, store.parquet / "runs" / "runs.parquet")
    counts["files"] = files + 1
    return counts


def generate(root: Path, layout: str, epochs: int) -> dict[str, int]:
    """Write the warehouse; returns the row count of every table and the number of files."""
    started = time.perf_counter()
    store = Warehouse(root).ensure()
    grid, needles = make_grid()
    per_file = 32 if layout == "sweep" else None
    counts = dict.fromkeys(TABLES, 0)
    if layout == "year":
        return _generate_year(store, grid, needles, epochs, started, counts)
    files = _write_cells(store, grid, needles, counts, per_file)
    for e in range(epochs):
        for m, model in enumerate(MODELS):
            for table, frame in make_chunk(grid, needles, m, e).items():
                counts[table] += frame.height
                files += _write_split(store, table, frame, model, epoch_name(e), per_file)
        if (e + 1) % 10 == 0 or e + 1 == epochs:
            print(
                f"  epoch {e + 1}/{epochs}: {counts['answers']:,} answers, "
                f"{counts['needle_outcomes']:,} needle outcomes, {files:,} files, "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
    return _write_runs(store, epochs, counts, files)


def _generate_year(
    store: Warehouse,
    grid: pl.DataFrame,
    needles: pl.DataFrame,
    epochs: int,
    started: float,
    counts: dict[str, int],
) -> dict[str, int]:
    """A year of compacted nightly sweeps: one file per table and model per
    EPOCHS_PER_FILE epochs (what compaction's merges leave: a few large files a folder)."""
    files = _write_cells(store, grid, needles, counts, None)
    for first in range(0, epochs, EPOCHS_PER_FILE):
        block = range(first, min(first + EPOCHS_PER_FILE, epochs))
        for m, model in enumerate(MODELS):
            frames: dict[str, list[pl.DataFrame]] = {}
            for e in block:
                for table, frame in make_chunk(grid, needles, m, e).items():
                    frames.setdefault(table, []).append(frame)
            for table, parts in frames.items():
                frame = pl.concat(parts)
                counts[table] += frame.height
                files += _write(store, table, frame, model, f"c-{epoch_name(first)}", merged=True)
        print(
            f"  epoch {block[-1] + 1}/{epochs}: {counts['answers']:,} answers, "
            f"{counts['needle_outcomes']:,} needle outcomes, {files:,} files, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return _write_runs(store, epochs, counts, files)


# A child's own peak RSS. ru_maxrss starts at the parent's peak (Linux keeps it across fork and
# exec): the children of a bench that had just generated the 10M warehouse in its own process
# reported its 4.6 GiB. VmHWM is the child's own address space's.
OWN_PEAK = """
def own_peak_mb():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""


ROLLUP_CHILD = (
    OWN_PEAK
    + """
import json, resource, sys, time
from pathlib import Path
from needlescope.warehouse.store import compaction, rollups_update
root = Path(sys.argv[1]).resolve()
start = time.perf_counter()
with compaction.exclusive(root):
    rebuild = sys.argv[2:] == ["rebuild"]
    done = rollups_update.update(root, compaction.snapshot(root), rebuild=rebuild)
print(json.dumps({"seconds": time.perf_counter() - start, "attempts": done.attempts,
                  "tally_rows": done.tally_rows, "answer_rows": done.answer_rows,
                  "invented_rows": done.invented_rows,
                  "rebuilt": done.rebuilt,
                  "peak_rss_mb": own_peak_mb()}))
"""
)


def build_rollups(root: Path, counts: dict[str, Any]) -> None:
    """The rollups derived from the raw tables once, as `needlescope rollups --rebuild` does
    (what the first compaction after an upgrade does), timed and cached with the warehouse."""
    child = run_child([PYTHON, "-c", ROLLUP_CHILD, str(root), "rebuild"])
    counts["rollups_s"] = child.data["seconds"]
    counts["rollups_rss_mb"] = child.data["peak_rss_mb"]
    counts["rollups_tally_rows"] = child.data["tally_rows"]
    counts["rollups_answer_rows"] = child.data["answer_rows"]
    counts["rollups_invented_rows"] = child.data.get("invented_rows", 0)
    counts["rollups_format"] = rollups.FORMAT


def nightly(root: Path, counts: dict[str, Any], repeat: int) -> None:
    """One more nightly sweep (20,000 cells, appended as a sweep writes: a file per table per
    batch of 32 cells) on a hard-linked copy of the warehouse: position_accuracy with the night's
    files fresh, then the compaction that ends the sweep (merges and the rollups' delta), then
    position_accuracy again."""
    work = Path(tempfile.mkdtemp(prefix="nightly-", dir=CACHE))
    try:
        copy = work / "wh"
        subprocess.run(["cp", "-al", str(root), str(copy)], check=True)
        store = Warehouse(copy)
        grid, needles = make_grid()
        e = counts["epochs"]
        files = 0
        for m, model in enumerate(MODELS):
            for table, frame in make_chunk(grid, needles, m, e).items():
                files += _write_split(store, table, frame, model, epoch_name(e), 32)
        sql = QUERIES["position_accuracy"]
        fresh = [run_child([PYTHON, "-c", QUERY_CHILD, str(copy), sql]) for _ in range(repeat)]
        best = min(fresh, key=lambda r: r.data["query_s"]).data
        print(
            f"{'nightly sweep':>20}: {files:,} files appended; position_accuracy with them "
            f"fresh: {best['query_s']:.2f} s (views {best['views_s']:.2f} s)",
            flush=True,
        )
        merge = run_child([NEEDLESCOPE, "compact", "-w", str(copy)])
        after = [run_child([PYTHON, "-c", QUERY_CHILD, str(copy), sql]) for _ in range(repeat)]
        best_after = min(after, key=lambda r: r.data["query_s"]).data
        print(
            f"{'':>22}compaction with the rollups' delta: {merge.wall_s:.1f} s wall "
            f"({merge.cpu_s:.1f} s CPU, peak RSS {merge.peak_rss_mb:,.0f} MiB; "
            f"{merge.stdout.strip().splitlines()[-1]}); position_accuracy after it: "
            f"{best_after['query_s']:.2f} s",
            flush=True,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compacted(root: Path, sweep_root: Path, args: argparse.Namespace) -> None:
    """The sweep layout, copied, then compacted by `needlescope compact` (timed)."""
    if not (sweep_root / "bench-counts.json").exists():
        print(f"the sweep layout first: run with --layout sweep --epochs {args.epochs}")
        raise SystemExit(2)
    print(f"copying {sweep_root} ...", flush=True)
    shutil.copytree(sweep_root, root)
    counts = json.loads((root / "bench-counts.json").read_text())
    merge = run_child([NEEDLESCOPE, "compact", "-w", str(root), "--min-files", "2"])
    expire = run_child([NEEDLESCOPE, "compact", "-w", str(root), "--grace", "0"])
    print(merge.stdout.strip(), "/", expire.stdout.strip())
    files = [p for p in root.rglob("*.parquet") if p.name != "_empty.parquet"]
    counts |= {
        "compact_files_before": counts["files"],
        "files": len(files),
        "compact_s": merge.wall_s,
        "compact_cpu_s": merge.cpu_s,
        "compact_rss_mb": merge.peak_rss_mb,
        "expire_s": expire.wall_s,
    }
    (root / "bench-counts.json").write_text(json.dumps(counts))


# ---------------------------------------------------------------------------- measuring

# Each query in a fresh process: connect (create the views), run, fetch every row.
QUERY_CHILD = (
    OWN_PEAK
    + """
import json, resource, sys, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
from needlescope.warehouse.store import Warehouse
t0, c0 = time.perf_counter(), cpu()
con = Warehouse(sys.argv[1]).connect()
t1, c1 = time.perf_counter(), cpu()
rows = con.sql(sys.argv[2]).fetchall()
t2, c2 = time.perf_counter(), cpu()
print(json.dumps({"views_s": t1 - t0, "query_s": t2 - t1, "query_cpu_s": c2 - c1,
                  "rows": len(rows),
                  "peak_rss_mb": own_peak_mb()}))
"""
)

# Every view of each probe's own views (warehouse/probes/), on one connection: each run
# fetches every row (best of argv[2] runs).
PROBE_VIEWS_CHILD = """
import json, re, sys, time
from needlescope.warehouse import probes
from needlescope.warehouse.store import Warehouse
names = re.findall(r"^CREATE OR REPLACE VIEW (\\w+)", probes.views_sql(), re.M)
con = Warehouse(sys.argv[1]).connect()
best = {}
for name in names:
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        con.sql(f"SELECT * FROM {name}").fetchall()
        best[name] = min(best.get(name, 1e9), time.perf_counter() - start)
print(json.dumps({"views": best}))
"""


# write_report in a fresh process, with the wall time of its phases (renders run in worker
# processes: their CPU is the children's).
REPORT_CHILD = (
    OWN_PEAK
    + """
import json, resource, sys, tempfile, time
from pathlib import Path
from needlescope.warehouse.charts import vega
from needlescope.warehouse.report import data, page as report
from needlescope.warehouse.stats import tables
phases = {}
def timed(module, name, label):
    fn = getattr(module, name, None)
    if fn is None:
        return
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            phases[label] = phases.get(label, 0.0) + time.perf_counter() - start
    setattr(module, name, wrapper)
timed(report, "_connect", "views")
timed(data, "load", "statistics queries")
timed(report.summary_section, "collect", "summary (on its own connection, beside)")
try:
    from needlescope.warehouse.report import extras as report_extras
except ImportError:
    report_extras = None
if report_extras is not None and sys.argv[2:] == ["core"]:
    # The report as before report_extras (statistics, comparisons, drill-down) was added.
    report_extras.collect = lambda *args, **kwargs: report_extras.Extras()
elif report_extras is not None:
    timed(report_extras, "collect", "report_extras.collect")
    timed(report_extras, "_in_background", "extras in the background (beside)")
timed(report, "probe_figures", "probe charts data")
timed(tables, "write_excel", "stats.xlsx")
timed(vega, "chart_spec", "chart specs")
timed(vega, "chart_text", "chart specs (JSON)")
timed(report, "_page", "page")
if __name__ == "__main__":
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        report.write_report(Path(sys.argv[1]), Path(out))
    wall = time.perf_counter() - start
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"wall_s": wall, "cpu_s": me.ru_utime + me.ru_stime,
                      "renderers_cpu_s": kids.ru_utime + kids.ru_stime,
                      "peak_rss_mb": own_peak_mb(),
                      "renderer_peak_rss_mb": kids.ru_maxrss / 1024, "phases": phases}))
"""
)


@dataclass
class Child:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float  # of the largest process of the tree
    stdout: str

    @property
    def data(self) -> dict[str, Any]:
        return dict(json.loads(self.stdout.strip().splitlines()[-1]))


def run_child(argv: list[str]) -> Child:
    """Run a process to its end: wall and CPU seconds, peak RSS and its output."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed ({proc.returncode}):\n{text[-3000:]}")
    return Child(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text)


def disk_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.parquet"))


QUERIES = {
    "accuracy_by_length": "SELECT * FROM accuracy_by_length",
    "recall_stats": "SELECT * FROM recall_stats",
    "position_accuracy": "SELECT * FROM position_accuracy",
}


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# The figures bench/README.md recorded before issue 21's rollups: at 1M answers (batched
# layout, 2026-11-22) and at 10M (year layout, the views of that day, 2026-11-26).
BASELINES = {
    1: {
        "accuracy_by_length": "0.53 s",
        "recall_stats": "0.77 s",
        "position_accuracy": "1.81 s",
        "report": "30.6 s",
        "probe_views": "none at 1M (first measured 2026-11-26)",
    },
    10: {
        "accuracy_by_length": "6.19 s",
        "recall_stats": "16.84 s",
        "position_accuracy": "41.69 s",
        "report": "30.6 s at 1M",
        "probe_views": "4.51 s at 10M (distractor_results, the views of 2026-11-26)",
    },
}


def scale(counts: dict[str, Any]) -> str:
    return f"{round(counts['answers'] / 1e6)}M answers"


def baseline(name: str, counts: dict[str, Any]) -> str:
    millions = round(counts["answers"] / 1e6)
    dated = "2026-11-22" if millions < 10 else "2026-11-26"
    figure = BASELINES.get(1 if millions < 10 else 10, {}).get(name, "?")
    return f"{figure} at {millions}M ({dated})" if " at " not in figure else figure


def probe_views(root: Path, counts: dict[str, Any], repeat: int) -> None:
    """Each probe's own views (views_<probe>.sql) over the warehouse's answers: the slowest."""
    found = run_child([PYTHON, "-c", PROBE_VIEWS_CHILD, str(root), str(repeat)]).data["views"]
    slowest = sorted(found.items(), key=lambda kv: -kv[1])
    print(
        f"{'probe views':>20}: {len(found)} views, slowest "
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in slowest[:3]),
        flush=True,
    )
    name, seconds = slowest[0]
    print(
        f"TARGET each probe's own view at {scale(counts)}: {seconds:.2f} s ({name}, the slowest"
        f" of {len(found)}) | goal <= 1 s at 10M answers | baseline"
        f" {baseline('probe_views', counts)}",
        flush=True,
    )


def report_at_scale(root: Path, counts: dict[str, Any]) -> int:
    """The whole report once (at 10M answers it takes minutes): write_report in a fresh
    process, with the wall time of its phases."""
    script = Path(tempfile.mkdtemp()) / "report_child.py"
    script.write_text(REPORT_CHILD)
    try:
        child = run_child([PYTHON, str(script), str(root), "all"])
    finally:
        shutil.rmtree(script.parent, ignore_errors=True)
    phases = child.data
    peak = max(phases["peak_rss_mb"], phases["renderer_peak_rss_mb"])
    print(
        f"TARGET report with every section at {scale(counts)}: {phases['wall_s']:.1f} s wall,"
        f" peak {peak:,.0f} MiB | goal <= 15 s, <= 2 GiB at 10M answers | baseline"
        f" {baseline('report', counts)}",
        flush=True,
    )
    print(
        f"{'write_report':>20}: {phases['wall_s']:.1f} s wall; {phases['cpu_s']:.1f} s CPU in "
        f"the main process (peak RSS {phases['peak_rss_mb']:,.0f} MiB), "
        f"{phases['renderers_cpu_s']:.1f} s in the chart renderers"
    )
    for label, seconds in phases["phases"].items():
        print(f"{'':>22}{label}: {seconds:.1f} s")
    print(f"load average after: {load_average()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--layout", choices=("batched", "sweep", "compacted", "year"), default="batched"
    )
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--regen", action="store_true", help="rebuild the cached warehouse")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each query (best kept)")
    parser.add_argument("--no-report", action="store_true")
    parser.add_argument(
        "--phases", action="store_true", help="also time the whole report's phases in-process"
    )
    args = parser.parse_args()

    per_file = f"-{EPOCHS_PER_FILE}pf" if args.layout == "year" else ""
    root = CACHE / f"warehouse-v{VERSION}-{args.layout}-{args.epochs}e{per_file}"
    stamp = root / "bench-counts.json"
    if args.layout == "compacted" and (args.regen or not stamp.exists()):
        shutil.rmtree(root, ignore_errors=True)
        compacted(root, CACHE / f"warehouse-v{VERSION}-sweep-{args.epochs}e", args)
    elif args.regen or not stamp.exists():
        shutil.rmtree(root, ignore_errors=True)
        print(f"generating {root} ...", flush=True)
        start = time.perf_counter()
        counts = generate(root, args.layout, args.epochs)
        counts["generate_s"] = round(time.perf_counter() - start)
        counts["epochs"] = args.epochs
        stamp.write_text(json.dumps(counts))
    counts = json.loads(stamp.read_text())
    # A sweep's compaction keeps the rollups; the sweep layout is the warehouse before it.
    if args.layout != "sweep" and counts.get("rollups_format") != rollups.FORMAT:
        print("deriving the rollups from the raw tables ...", flush=True)
        build_rollups(root, counts)
        stamp.write_text(json.dumps(counts))
    size = disk_size(root)
    print(
        f"warehouse ({args.layout}): {counts['answers']:,} answer rows, "
        f"{counts['needle_outcomes']:,} needle outcomes, {counts['hallucinations']:,} "
        f"hallucinations, {counts['duplicates']:,} duplicates, {counts['cells']:,} cells, "
        f"{counts['runs']} run rows; {counts['files']:,} files, {size / 2**20:,.0f} MiB "
        f"(generated in {counts['generate_s']} s)"
    )
    if "rollups_s" in counts:
        print(
            f"rollups derived from the raw tables in {counts['rollups_s']:.0f} s (peak RSS "
            f"{counts['rollups_rss_mb']:,.0f} MiB): {counts['rollups_tally_rows']:,} needle "
            f"tally rows, {counts.get('rollups_answer_rows', 0):,} answer tally rows"
        )
    if "compact_s" in counts:
        print(
            f"compaction of the sweep layout: {counts['compact_files_before']:,} files merged "
            f"into {counts['files']:,} in {counts['compact_s']:.0f} s wall "
            f"({counts['compact_cpu_s']:.0f} s CPU, peak RSS {counts['compact_rss_mb']:,.0f} MiB); "
            f"deleting the merged-away files {counts['expire_s']:.1f} s"
        )
    print(f"load average before measuring: {load_average()}", flush=True)
    for name, sql in QUERIES.items():
        runs = [run_child([PYTHON, "-c", QUERY_CHILD, str(root), sql]) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r.data["query_s"]).data
        times = ", ".join(f"{r.data['query_s']:.2f}" for r in runs)
        print(
            f"{name:>20}: query {best['query_s']:.2f} s ({best['query_cpu_s']:.2f} s CPU; "
            f"runs {times}), "
            f"views {best['views_s']:.2f} s, {best['rows']:,} rows, "
            f"peak RSS {max(r.data['peak_rss_mb'] for r in runs):,.0f} MiB",
            flush=True,
        )
        print(
            f"TARGET {name} at {scale(counts)}: {best['query_s']:.2f} s | goal <= 1 s at 10M"
            f" answers | baseline {baseline(name, counts)}",
            flush=True,
        )
    probe_views(root, counts, args.repeat)
    if args.layout == "year":
        counts.setdefault("epochs", args.epochs)
        nightly(root, counts, args.repeat)
    if args.no_report:
        return 0
    if args.layout == "year":
        return report_at_scale(root, counts)
    with tempfile.TemporaryDirectory() as out:
        cli = run_child([NEEDLESCOPE, "report", "--warehouse", str(root), "--out", out])
        html = Path(out, "report.html").stat().st_size
        pngs = len(list(Path(out).glob("*.png")))
    print(
        f"TARGET report with every section at {scale(counts)}: {cli.wall_s:.1f} s wall, peak"
        f" {cli.peak_rss_mb:,.0f} MiB | goal <= 15 s, <= 2 GiB at 10M answers | baseline"
        f" {baseline('report', counts)}",
        flush=True,
    )
    print(
        f"{'needlescope report':>20}: {cli.wall_s:.1f} s wall, {cli.cpu_s:.1f} s CPU (with its "
        f"renderers), peak RSS {cli.peak_rss_mb:,.0f} MiB (largest process); report.html "
        f"{html / 2**20:.1f} MiB, {pngs} charts",
        flush=True,
    )
    script = Path(tempfile.mkdtemp()) / "report_child.py"
    script.write_text(REPORT_CHILD)
    try:
        variants = [("core", "without extras")]
        if args.phases:
            variants.insert(0, ("all", "write_report"))
        for variant, title in variants:
            try:
                phases = run_child([PYTHON, str(script), str(root), variant]).data
            except RuntimeError as exc:
                print(f"{title:>20}: failed: {str(exc)[-300:]}")
                continue
            print(
                f"{title:>20}: {phases['wall_s']:.1f} s wall; {phases['cpu_s']:.1f} s CPU in "
                f"the main process (peak RSS {phases['peak_rss_mb']:,.0f} MiB), "
                f"{phases['renderers_cpu_s']:.1f} s in the chart renderers (peak RSS "
                f"{phases['renderer_peak_rss_mb']:,.0f} MiB each)"
            )
            for label, seconds in phases["phases"].items():
                print(f"{'':>22}{label}: {seconds:.1f} s")
    finally:
        shutil.rmtree(script.parent, ignore_errors=True)
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
