"""Paired comparisons in one pass (significance.paired_comparisons): each pair of a batch is
what it is alone, its errors its own; the needle counts are the plain needle-by-needle join's;
two threads asking for overlapping batches compute each pair once; the report's comparisons
stop between chunks at their deadline."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

from needlescope.warehouse.report.sections import compare as compare_section
from needlescope.warehouse.stats import drift, memo, pairing
from needlescope.warehouse.stats import significance as sig
from needlescope.warehouse.stats.significance import Side
from needlescope.warehouse.store import views
from needlescope.warehouse.store.figures import COUNTED
from tests.warehouse.test_significance import Sweep, pattern

EPOCHS = ("e1", "e2", "e3")
SEP = compare_section.SEP
PAIRS = [
    (Side("a", "e3"), Side("b", "e3")),
    (Side("a", "e1"), Side("b", "e1")),  # a parse failure of b's, 130-needle answers
    (Side("a", "e2"), Side("b", "e2")),  # a failed request of a's
    (Side("a", "e2"), Side("c", "e2")),  # an invalid answer of c's
    (Side("a"), Side("b")),  # every epoch, pooled
    (Side("c"), Side("a", "e1")),  # c takes a's epoch
    (Side("a", "e2"), Side("a", "e3")),  # by cell
    (Side("b", "e1"), Side("b", "e3")),
    (Side("a", "e1"), Side("d", "e1")),  # d's answers share a context id: an error
    (Side("d", "e1"), Side("d", "e2")),  # ...but not a cell id
    (Side("a", "e1"), Side("a")),  # itself: an error
    (Side("a", "e1"), Side("nobody", "e1")),  # no partner for any answer
]
SHARED_KEY, ITSELF = 8, 10
NEEDLE_COUNTS = ("needle_pairs", "mcnemar_b01", "mcnemar_b10")


def varied(root: Path) -> Sweep:
    """Models a, b, c in three epochs (7 needles: accuracies that are not round), with failed,
    unparsed, invalid and unpaired answers, answers of 130 needles (more than a mask holds)
    and a needle row written twice; model d, whose two cells share a context."""
    sweep = Sweep(root)
    for day, epoch in enumerate(EPOCHS):
        sweep.run(f"run-{epoch}", epoch, day=day)
    for e, epoch in enumerate(EPOCHS):
        for m, model in enumerate("abc"):
            for length in (1000, 2000):
                for repeat in range(4):
                    hits = (3 * m + 2 * e + length // 1000 + 5 * repeat) % 8
                    sweep.answer(model, epoch, length, pattern(hits, 7), repeat=repeat)
            for repeat in range(2):
                sweep.answer(
                    model, epoch, 5000, pattern(40 + 30 * m + 7 * repeat, 130), repeat=repeat
                )
    sweep.answer("a", "e2", 4000, None, error="timeout")
    sweep.answer("b", "e2", 4000, pattern(3))
    sweep.answer("a", "e1", 4000, pattern(2))
    sweep.answer("b", "e1", 4000, None)  # does not parse
    sweep.answer("a", "e2", 4000, pattern(4), repeat=1)
    sweep.answer("c", "e2", 4000, pattern(1), repeat=1, validity="truncated")
    sweep.answer("a", "e3", 8000, pattern(2))  # only a
    sweep.answer("b", "e1", 16000, pattern(3))  # only b
    needles = sweep.rows[("needle_outcomes", "b")]
    needles.append(dict(needles[0]))  # written twice: pairs needle by needle
    for epoch in ("e1", "e2"):
        for repeat in range(2):
            sweep.answer("d", epoch, 1000, pattern(repeat + 1), repeat=repeat)
    _copy_cell(sweep, "d")
    return sweep


def _copy_cell(sweep: Sweep, model: str) -> None:
    """A second cell of ``model`` with the context of its first, answered in every epoch."""
    cell = dict(sweep.rows[("cells", model)][0])
    first = cell["cell_id"]
    cell["cell_id"] = f"{first}-again"
    sweep.rows[("cells", model)].append(cell)
    answers = [a for a in sweep.rows[("answers", model)] if a["cell_id"] == first]
    sweep.rows[("answers", model)] += [{**a, "cell_id": cell["cell_id"]} for a in answers]
    needles = [n for n in sweep.rows[("needle_outcomes", model)] if n["cell_id"] == first]
    sweep.rows[("needle_outcomes", model)] += [{**n, "cell_id": cell["cell_id"]} for n in needles]


@pytest.fixture
def con(tmp_path: Path) -> Any:
    connection = varied(tmp_path).connect()
    yield connection
    connection.close()


def test_a_batch_gives_each_pair_what_it_gives_alone(con: duckdb.DuckDBPyConnection) -> None:
    batch = sig.paired_comparisons(con, PAIRS, seed=3, resamples=300)
    assert list(batch) == PAIRS
    memo._memo.clear()  # each pair computed again, alone
    for i, (a, b) in enumerate(PAIRS):
        found = batch[(a, b)]
        if i in (SHARED_KEY, ITSELF):
            assert isinstance(found, ValueError)
            with pytest.raises(ValueError) as alone:
                sig.paired_comparison(con, a, b, seed=3, resamples=300)
            assert str(alone.value) == str(found)
            continue
        assert isinstance(found, sig.Comparison), (a, b, found)
        alone_found = sig.paired_comparison(con, a, b, seed=3, resamples=300)
        assert found == alone_found and found.cells.equals(alone_found.cells), (a, b)
    assert "share a pairing key (context_id)" in str(batch[PAIRS[SHARED_KEY]])
    assert "itself" in str(batch[PAIRS[ITSELF]])
    # what the warehouse was made of reached the figures
    figures = {pair: c for pair, c in batch.items() if isinstance(c, sig.Comparison)}
    assert figures[PAIRS[1]].dropped_parse_failures == 1 and figures[PAIRS[1]].unpaired_b == 1
    assert figures[PAIRS[2]].dropped_errors == 1 and figures[PAIRS[3]].dropped_invalid == 1
    assert figures[PAIRS[0]].unpaired_a == 1
    pooled = figures[PAIRS[4]]
    assert pooled.pairing == "epoch, context_id" and pooled.a.epoch is None
    assert pooled.n_pairs == sum(figures[PAIRS[i]].n_pairs for i in (0, 1, 2))
    assert figures[PAIRS[5]].a == Side("c", "e1") and figures[PAIRS[6]].pairing == "cell_id"
    assert figures[PAIRS[9]].n_pairs == 3  # d's copied cell pairs by its own cell id
    nobody = figures[PAIRS[11]]
    assert nobody.n_pairs == 0 and nobody.unpaired_a == 8 + 2 + 1  # 7-, 130-, 4-needle cells
    assert all(c.mcnemar_b01 + c.mcnemar_b10 > 0 for p, c in figures.items() if c.n_pairs > 8)


def test_needle_counts_are_the_plain_join(con: duckdb.DuckDBPyConnection) -> None:
    """Masks where an answer's needles fit, the join where not (130 needles, a repeated row):
    every cell's counts are those of the needle-by-needle join of the pairs."""
    batch = sig.paired_comparisons(con, PAIRS, resamples=50)
    checked = 0
    for found in batch.values():
        if isinstance(found, ValueError):
            continue
        counts = {
            (r["length"], r["needle_count"]): (
                r["needle_pairs"],
                r["mcnemar_b01"],
                r["mcnemar_b10"],
            )
            for r in found.cells.iter_rows(named=True)
            if r["needle_pairs"]
        }
        assert counts == _joined(con, found.a, found.b, found.pairing)
        checked += len(counts)
    assert checked > 20
    repeated = batch[PAIRS[1]]
    assert isinstance(repeated, sig.Comparison)
    # b's needle row written twice pairs with a's needle twice
    (ones,) = repeated.cells.filter(length=1000, needle_count=7).iter_rows(named=True)
    assert ones["needle_pairs"] == 4 * 7 + 1
    (long,) = repeated.cells.filter(length=5000).iter_rows(named=True)
    assert tuple(long[k] for k in NEEDLE_COUNTS) == (260, 60, 0)


def _joined(
    con: duckdb.DuckDBPyConnection, a: Side, b: Side, how: str
) -> dict[tuple[int, int], tuple[int, int, int]]:
    """Per (length, needle count): the needle pairs of the answers paired, joined row by row."""
    params: dict[str, Any] = {}
    sides = []
    for name, side in (("x", a), ("y", b)):
        params[f"{name}_model"] = side.model
        where = f"probe = 'recall' AND model = ${name}_model"
        if side.epoch is not None:
            params[f"{name}_epoch"] = side.epoch
            where += f" AND epoch = ${name}_epoch"
        sides.append(
            f"{name} AS (SELECT {pairing.KEYS[how]} AS k, *, {COUNTED} AS counted "
            f"FROM results WHERE {where})"
        )
    rows = con.execute(
        f"""WITH {", ".join(sides)}
        SELECT x.length, x.needle_count, count(*),
               count(*) FILTER (WHERE ox.outcome <> 'correct' AND oy.outcome = 'correct'),
               count(*) FILTER (WHERE ox.outcome = 'correct' AND oy.outcome <> 'correct')
        FROM x JOIN y ON x.k = y.k
        JOIN raw_needle_outcomes ox ON ox.run_id = x.run_id AND ox.epoch = x.epoch
            AND ox.cell_id = x.cell_id
        JOIN raw_needle_outcomes oy ON oy.run_id = y.run_id AND oy.epoch = y.epoch
            AND oy.cell_id = y.cell_id AND oy.needle_index = ox.needle_index
        WHERE x.error_kind IS NULL AND y.error_kind IS NULL AND x.counted AND y.counted
            AND x.accuracy IS NOT NULL AND y.accuracy IS NOT NULL
        GROUP BY ALL""",
        params,
    ).fetchall()
    return {(length, count): (n, b01, b10) for length, count, n, b01, b10 in rows}


def test_overlapping_batches_in_two_threads_compute_each_pair_once(
    con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    computed: Counter[tuple[Side, Side]] = Counter()
    reading = threading.Event()
    real = sig.read_pairs

    def counted(
        own: duckdb.DuckDBPyConnection, planned: Sequence[pairing.Planned], probe: str
    ) -> list[Any]:
        computed.update((p.a, p.b) for p in planned)
        reading.set()
        time.sleep(0.3)  # the other thread asks meanwhile
        return real(own, planned, probe)

    monkeypatch.setattr(sig, "read_pairs", counted)
    first, second = PAIRS[:5], list(reversed(PAIRS[2:8]))  # three pairs in both
    found: dict[str, Any] = {}

    def ask(name: str, pairs: list[tuple[Side, Side]]) -> None:
        own = views.beside(con)
        try:
            found[name] = sig.paired_comparisons(own, pairs)
        finally:
            own.close()

    threads = [threading.Thread(target=ask, args=("first", first))]
    threads[0].start()
    assert reading.wait(10)
    threads.append(threading.Thread(target=ask, args=("second", second)))
    threads[1].start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads), "deadlocked"
    taken = (Side("c", "e1"), Side("a", "e1"))  # PAIRS[5], c taking a's epoch
    assert set(computed) == {*PAIRS[:5], taken, *PAIRS[6:8]}
    assert max(computed.values()) == 1, computed
    for pair in PAIRS[2:5]:  # the shared pairs: the same comparison, computed by the first
        assert found["second"][pair] is found["first"][pair]


def test_drift_summary_is_each_models_epoch_drift(con: duckdb.DuckDBPyConnection) -> None:
    summary = {d["model"]: d for d in drift.drift_summary(con, "e3")}
    assert set(summary) == {"a", "b", "c"}
    for model, entry in summary.items():
        alone = drift.epoch_drift(con, model, "e3")
        assert alone is not None and entry["previous"] == "e2"
        assert (entry["n_pairs"], entry["diff"]) == (alone.n_pairs, alone.diff)


def test_comparisons_stop_between_chunks_at_the_deadline(
    con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = itertools.chain([0.0, 0.0], itertools.repeat(100.0))  # the deadline, chunk 1, …
    monkeypatch.setattr(compare_section, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    monkeypatch.setattr(compare_section, "CHUNK", 3)
    data = compare_section.collect(con, ["recall"])["recall"]
    pairs = list(data["pairs"].values())
    # a, b, c, d pooled: 6 pairs; the epochs of a, b, c: 3 each; of d: 1
    assert len(pairs) == 16
    assert list(data["pairs"])[:3] == [f"a{SEP * 2}b", f"a{SEP * 2}c", f"a{SEP * 2}d"]
    assert all("error" not in p for p in pairs[:2])
    assert "share a pairing key" in pairs[2]["error"]  # d's own error
    assert all("not computed" in p["error"] for p in pairs[3:])
    assert data["note"].endswith("13 pairs left out for time")
