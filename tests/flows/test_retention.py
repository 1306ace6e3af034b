"""Retention (flows/retention.py): a Prefect server needlescope starts removes flow runs (with
their task runs and states) older than 30 days by itself; after a run on the ephemeral server,
needlescope runs Prefect's flow-run vacuum itself, at most hourly; a user's own setting wins.
Counted by rows (SQLite files do not shrink) in a database whose runs are made old."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from needlescope.flows.local_server import running_prefect_server
from tests.support.prefect_server import base_env, free_port

OLD = "2026-01-01 00:00:00.000000"  # far past the 30 days kept


def post(api: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{api}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    for _ in range(20):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return dict(json.load(response))
        except urllib.error.HTTPError as error:
            if error.code != 503:  # the server's SQLite busy with its own start-up work
                raise
            time.sleep(0.5)
    raise AssertionError(f"{path}: 503 twenty times")


def finished_run(api: str, flow_id: str, tasks: int) -> str:
    done = {"type": "COMPLETED", "name": "Completed"}
    run = post(api, "/flow_runs/", {"flow_id": flow_id, "state": done})
    for index in range(tasks):
        post(
            api,
            "/task_runs/",
            {
                "flow_run_id": run["id"],
                "task_key": "query",
                "dynamic_key": str(index),
                "name": f"query ×32 {index}",
                "state": done,
            },
        )
    return str(run["id"])


def counts(db: Path) -> tuple[int, int, int]:
    with sqlite3.connect(db, timeout=30) as con:
        return tuple(  # type: ignore[return-value]
            con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("flow_run", "task_run", "task_run_state")
        )


def age(db: Path, run_ids: list[str]) -> None:
    with sqlite3.connect(db, timeout=30) as con:
        con.executemany(
            "UPDATE flow_run SET end_time = ? WHERE id = ?", [(OLD, r) for r in run_ids]
        )


def vacuum_after_run(home: Path, **env: str) -> str:
    script = (
        "from needlescope.flows.cli._common import prefect_environment\n"
        "prefect_environment()\n"
        "from needlescope.flows.retention import vacuum_after_ephemeral_run\n"
        "print(vacuum_after_ephemeral_run())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**base_env(home), **env},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_old_flow_runs_go_their_task_runs_with_them_and_the_warehouse_is_not_touched(
    tmp_path: Path,
) -> None:
    home = tmp_path / "prefect"
    home.mkdir()
    db = home / "prefect.db"
    env = base_env(home) | {"PREFECT_SERVER_SERVICES_DB_VACUUM_LOOP_SECONDS": "1"}
    with running_prefect_server(
        free_port(), ui=False, env=env, log_path=home / "server.log", log=lambda _: None
    ) as api:
        flow_id = post(api, "/flows/", {"name": "sweep"})["id"]
        old = [finished_run(api, flow_id, tasks=3) for _ in range(2)]
        recent = finished_run(api, flow_id, tasks=2)
        assert counts(db)[:2] == (3, 8)
        age(db, old)
        deadline = time.monotonic() + 90
        while counts(db)[:2] != (1, 2):
            assert time.monotonic() < deadline, (counts(db), (home / "server.log").read_text())
            time.sleep(0.5)
        assert counts(db) == (1, 2, 2)  # the recent run, its task runs and their states

    # The ephemeral server runs no flow-run vacuum: a run's end does, where the user lets it.
    age(db, [recent])
    off = {"PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED": "events"}
    assert vacuum_after_run(home, **off) == "None"
    assert counts(db) == (1, 2, 2)
    (home / "needlescope-flow-run-vacuum").unlink()  # as if the hour had passed
    # Result files an older needlescope left: those past the retention go, nothing else.
    storage = home / "storage"
    storage.mkdir(exist_ok=True)
    for name in ("needlescope-query-old", "needlescope-query-new", "someone-elses-old"):
        (storage / name).write_text("{}")
    month_ago = time.time() - 31 * 24 * 3600
    for name in ("needlescope-query-old", "someone-elses-old"):
        os.utime(storage / name, (month_ago, month_ago))
    assert vacuum_after_run(home) == "0"
    assert sorted(p.name for p in storage.iterdir()) == [
        "needlescope-query-new",
        "someone-elses-old",
    ]
    assert counts(db) == (0, 0, 0)
    assert (home / "needlescope-flow-run-vacuum").is_file()
    assert vacuum_after_run(home) == "None"  # not again within the hour
