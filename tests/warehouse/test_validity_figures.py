"""Accuracy figures over valid answers, the invalid ones counted beside them; the seed-exact
views keep the seed's definitions; rows stored before validity existed count as valid."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from needlescope.warehouse.stats import accuracy as stats_accuracy
from needlescope.warehouse.stats import significance as sig
from needlescope.warehouse.stats import summaries as stats
from needlescope.warehouse.stats.significance import Side
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.schema import ANSWERS
from tests.warehouse.test_significance import Sweep, pattern, row


def sweep(root: Path) -> Sweep:
    """Model m at length 1000: three valid answers (100), two truncated ones that parsed (0),
    a truncated one that did not parse, an empty one out of thinking budget, a failed request.
    Model n: the same contexts, all valid (50)."""
    s = Sweep(root)
    s.run("run-e", "e")
    for repeat in range(3):
        s.answer("m", "e", 1000, pattern(4), repeat=repeat, validity="valid")
    for repeat in (3, 4):
        s.answer("m", "e", 1000, pattern(0), repeat=repeat, validity="truncated")
    s.answer("m", "e", 1000, None, repeat=5, validity="truncated")  # cut mid-JSON: no parse
    s.answer("m", "e", 1000, None, repeat=6, validity="thinking_exhausted", empty=True)
    s.answer("m", "e", 1000, None, repeat=7, error="timeout")
    for repeat in range(7):
        s.answer("n", "e", 1000, pattern(2), repeat=repeat, validity="valid")
    return s


def test_figures_count_valid_answers_and_show_the_invalid_ones(tmp_path: Path) -> None:
    con = sweep(tmp_path).connect()
    by_validity = dict(con.execute("SELECT validity, count(*) FROM results GROUP BY 1").fetchall())
    assert by_validity == {"valid": 10, "truncated": 3, "thinking_exhausted": 1, None: 1}

    recall = stats.recall_stats(con)
    m = row(recall, model="m")
    assert (m["answers"], m["graded"], m["parse_failures"], m["errors"]) == (3, 3, 0, 1)
    assert m["mean_accuracy"] == 100.0 and m["min_accuracy"] == 100.0
    assert (m["invalid"], m["invalid_why"]) == (4, "thinking_exhausted 1, truncated 3")
    assert row(recall, model="n")["invalid"] == 0

    table = stats_accuracy.accuracy_table(con, axes=("model",))
    m = row(table, model="m")
    assert (m["answers"], m["graded"], m["invalid"], m["mean_accuracy"]) == (3, 3, 4, 100.0)
    assert m["needles"] == 12 and m["needle_hit_rate"] == 1.0  # the truncated needles left out

    rates = stats.needle_rates(con)
    assert set(rates.filter(rates["model"] == "m")["parsed_answers"].to_list()) == {3}

    (effective,) = (
        stats_accuracy.effective_lengths(con, threshold=85)
        .filter(stats_accuracy.effective_lengths(con)["model"] == "m")
        .to_dicts()
    )
    assert (effective["effective_length"], effective["invalid"]) == (1000, 4)

    found = sig.paired_comparison(con, Side("m", "e"), Side("n", "e"))
    assert (found.n_pairs, found.dropped_invalid, found.unpaired_a) == (3, 4, 1)
    assert found.mean_a == 100.0 and found.mean_b == 50.0


def test_the_seed_exact_views_keep_the_seeds_definitions(tmp_path: Path) -> None:
    """accuracy_by_length counts every answer as the seed did (a truncated reply that does not
    parse is a parse failure), with the invalid ones named beside it."""
    con = sweep(tmp_path).connect()
    (m,) = con.sql("SELECT * FROM accuracy_by_length WHERE model = 'm'").pl().to_dicts()
    assert (m["answers"], m["parse_failures"], m["graded"], m["errors"]) == (6, 1, 5, 1)
    assert m["mean_accuracy"] == (3 * 100.0 + 2 * 0.0) / 5
    assert (m["invalid"], m["invalid_why"]) == (4, "thinking_exhausted 1, truncated 3")
    (records,) = con.execute(
        "SELECT DISTINCT total_records FROM position_accuracy WHERE model = 'm'"
    ).fetchall()
    assert records == (5,)  # every parsed answer's needles, as the seed counted them


def test_answers_stored_before_validity_existed_count_as_valid(tmp_path: Path) -> None:
    """A schema-2 file (no validity, no cached_tokens column) reads as `unknown`."""
    s = Sweep(tmp_path)
    s.run("run-e", "e")
    s.answer("m", "e", 1000, pattern(4), validity="valid")
    con = s.connect()
    con.close()
    old = pa.schema([f for f in ANSWERS if f.name not in ("validity", "cached_tokens")])
    record = {
        "schema_version": 2,
        "run_id": "run-e",
        "epoch": "e",
        "cell_id": "m-ctx-1000-4-1-pattern",
        "model": "m",
        "probe": "recall",
        "parse_ok": True,
        "accuracy": 50.0,
    }
    folder = tmp_path / "parquet" / "answers" / "recall" / "m"
    pq.write_table(pa.Table.from_pylist([record], schema=old), folder / "old-schema.parquet")
    s.answer("m", "e", 1000, pattern(2), repeat=1)  # its cell row; the answer is the old one
    s.rows[("answers", "m")].clear()
    con = s.connect()
    rows = con.execute("SELECT accuracy, validity FROM results ORDER BY accuracy").fetchall()
    assert rows == [(50.0, "unknown"), (100.0, "valid")]
    (m,) = stats.recall_stats(con).to_dicts()
    assert (m["answers"], m["invalid"], m["mean_accuracy"]) == (2, 0, 75.0)
    assert Warehouse(tmp_path).answer_validities("e") == {
        "m-ctx-1000-4-0-pattern": "valid",
        "m-ctx-1000-4-1-pattern": "unknown",
    }


def test_probe_views_count_valid_answers(tmp_path: Path) -> None:
    """goto's success rate and Counting-Stars' accuracy leave invalid answers out, and say
    how many there were."""
    store = Warehouse(tmp_path).ensure()
    cells, answers = [], []
    for i, (probe, accuracy, validity) in enumerate(
        [
            ("goto", 100.0, "valid"),
            ("goto", 0.0, "truncated"),
            ("goto", 0.0, "valid"),
            ("counting_stars", 80.0, "valid"),
            ("counting_stars", 0.0, "refused"),
        ]
    ):
        cell_id = f"{probe}-{i}"
        cells.append(
            {
                "cell_id": cell_id,
                "context_id": cell_id,
                "run_id": "r",
                "model": "m",
                "probe": probe,
                "length": 10,
                "length_unit": "lines",
                "needle_count": 1,
                "repeat": i,
                "probe_params": '{"order": "ordered", "language": "en"}',
            }
        )
        answers.append(
            {
                "run_id": "r",
                "epoch": "e",
                "cell_id": cell_id,
                "model": "m",
                "probe": probe,
                "parse_ok": True,
                "accuracy": accuracy,
                "validity": validity,
            }
        )
    store.append("cells", cells)
    store.append("answers", answers)
    con = store.connect()
    (goto,) = con.sql("SELECT * FROM goto_success").pl().to_dicts()
    assert (goto["answers"], goto["successes"], goto["success_rate"]) == (2, 1, 0.5)
    assert (goto["invalid"], goto["invalid_why"]) == (1, "truncated 1")
    (stars,) = con.sql("SELECT * FROM stars_accuracy_by_length").pl().to_dicts()
    assert (stars["answers"], stars["mean_accuracy"], stars["invalid"]) == (1, 80.0, 1)
