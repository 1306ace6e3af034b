"""The epochs read from one pass over the attempts (warehouse/stats/epochs.py) equal what each
question's own query over `result_attempts` gave (the queries it replaced, kept here), on
random attempts: several probes and models, epochs of request errors only, ties and attempts
without a time."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from needlescope.warehouse.stats import epochs

START = datetime(2026, 1, 1, tzinfo=UTC)


def attempts(seed: int) -> duckdb.DuckDBPyConnection:
    rng = random.Random(seed)
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE result_attempts (probe VARCHAR, model VARCHAR, epoch VARCHAR,"
        " error_kind VARCHAR, answered_at TIMESTAMPTZ)"
    )
    rows = []
    for _ in range(rng.randint(0, 120)):
        at = None if rng.random() < 0.1 else START + timedelta(hours=rng.randint(0, 30))
        rows.append(
            (
                rng.choice(["recall", "goto", "cases"]),
                rng.choice(["m1", "m2", "m3"]),
                f"e{rng.randint(1, 8)}",
                rng.choice([None, None, "timeout", "rate_limited"]),
                at,
            )
        )
    if rows:
        con.executemany("INSERT INTO result_attempts VALUES (?, ?, ?, ?, ?)", rows)
    return con


def old_by_first_graded(con: duckdb.DuckDBPyConnection, probe: str, models: list[str]) -> dict:
    rows = con.execute(
        """
        SELECT model, epoch, min(answered_at) AS first FROM result_attempts
        WHERE probe = $probe AND error_kind IS NULL AND list_contains($models, model)
        GROUP BY model, epoch ORDER BY model, first, epoch
        """,
        {"probe": probe, "models": models},
    ).fetchall()
    found: dict[str, list[str]] = {}
    for model, epoch, _ in rows:
        found.setdefault(model, []).append(epoch)
    return found


def old_latest(con: duckdb.DuckDBPyConnection, probe: str) -> str | None:
    rows = con.execute(
        """
        SELECT epoch FROM result_attempts WHERE probe = $probe AND error_kind IS NULL
        GROUP BY epoch ORDER BY min(answered_at) DESC, epoch DESC LIMIT 1
        """,
        {"probe": probe},
    ).fetchall()
    return rows[0][0] if rows else None


@pytest.mark.parametrize("seed", range(16))
def test_one_pass_answers_each_question_as_its_own_query_did(seed: int) -> None:
    con = attempts(seed)
    probes = [
        p
        for (p,) in con.execute("SELECT DISTINCT probe FROM result_attempts ORDER BY 1").fetchall()
    ]
    assert epochs.probes(con) == probes
    for probe in ("recall", "goto", "cases", "absent"):
        seen = con.execute(
            "SELECT DISTINCT epoch FROM result_attempts WHERE probe = ? ORDER BY 1", [probe]
        ).fetchall()
        assert epochs.seen(con, probe) == [e for (e,) in seen]
        for models in (["m1", "m2", "m3"], ["m2"], []):
            assert epochs.by_first_graded(con, probe, models) == old_by_first_graded(
                con, probe, models
            )
        assert epochs.latest_graded(con, probe) == old_latest(con, probe)
        for model in ("m1", "m2", "m3"):
            graded = con.execute(
                "SELECT DISTINCT epoch FROM result_attempts WHERE model = ? AND probe = ?"
                " AND error_kind IS NULL ORDER BY 1",
                [model, probe],
            ).fetchall()
            assert epochs.graded(con, probe, model) == [e for (e,) in graded]
