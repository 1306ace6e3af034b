"""A reply cached by Prefect's own local storage (an earlier needlescope) is found through
the query task runs' ResultFiles, and the other way round, on a real Prefect server."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.prefect_server import cli_env

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from prefect import flow, task
    from needlescope.tasks.result_files import with_result_files

    calls = []

    @task(cache_key_fn=lambda context, parameters: "needlescope-query-" + parameters["key"],
          persist_result=True)
    async def ask(key: str) -> dict:
        calls.append(key)
        return {"reply": "ünïcode ✓ " + key}

    @flow
    async def sweep(key: str, ours: bool) -> list:
        asked = with_result_files(ask) if ours else ask
        state = await asked(key, return_state=True)
        return [type(asked.result_storage).__name__, state.name, await state.result()]

    out = []
    out.append(asyncio.run(sweep("a", ours=False)))  # Prefect's storage writes
    out.append(asyncio.run(sweep("a", ours=True)))   # ours finds it
    out.append(asyncio.run(sweep("b", ours=True)))   # ours writes
    out.append(asyncio.run(sweep("b", ours=False)))  # Prefect's finds it
    print(json.dumps({"runs": out, "calls": calls}))
    """
)


def test_cached_replies_cross_between_prefects_storage_and_ours(prefect_api, tmp_path: Path):
    api, home = prefect_api
    env = {**cli_env(home, api), "PREFECT_LOCAL_STORAGE_PATH": str(tmp_path / "storage")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["calls"] == ["a", "b"]  # each key computed once, across both storages
    assert found["runs"] == [
        ["NoneType", "Completed", {"reply": "ünïcode ✓ a"}],
        ["ResultFiles", "Cached", {"reply": "ünïcode ✓ a"}],
        ["ResultFiles", "Completed", {"reply": "ünïcode ✓ b"}],
        ["NoneType", "Cached", {"reply": "ünïcode ✓ b"}],
    ]
    assert sorted(p.name for p in (tmp_path / "storage").iterdir()) == [
        "needlescope-query-a",
        "needlescope-query-b",
    ]
