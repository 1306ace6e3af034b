"""Operations on a real Prefect server: schedules, the UI's Retry, rerun-failed, work pools,
Secret blocks and rate limits. Requests are counted at a local OpenAI-wire-format server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from needlescope.warehouse.store import Warehouse
from tests.support.openai_server import FakeOpenAIServer
from tests.support.prefect_server import BIN

KEY = "sk-ops-4d1c8e77"
ENV = {"NS_FAKE_KEY": KEY}
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def perfect_answer(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    haystack = prompt.split("<text>")[1].split("</text>")[0]
    numbers = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(numbers)})


def config_text(
    base_url: str,
    name: str,
    *,
    repeats: int = 2,
    schedule: str = "",
    key: str = "api_key_env: NS_FAKE_KEY",
    model: str = "fake",
) -> str:
    return f"""
name: {name}
seed: 21
retry: {{retries: 0, backoff_s: [0]}}
{schedule}
models:
  - name: {model}
    provider: openai
    base_url: {base_url}
    model: fake-model
    {key}
    concurrency: 4
probes:
  - probe: recall
    lengths: [500, 900]
    length_unit: chars
    needle_counts: [1, 3]
    fillers: [pattern, noise]
    repeats: {repeats}
"""


class _Patient(httpx.Client):
    """The UI's client: a 503 (the server busy, as on a loaded 2-core machine) is asked again,
    and so is a read that timed out (the UI polls again; only reads: a POST may have landed)."""

    def request(self, method: str, *args: Any, **kwargs: Any) -> httpx.Response:  # type: ignore[override]
        for attempt in range(10):
            try:
                response = super().request(method, *args, **kwargs)
            except httpx.TimeoutException:
                if method.upper() != "GET" or attempt == 9:
                    raise
                continue
            if response.status_code != 503:
                return response
            time.sleep(1)
        return response


class Api:
    """The few Prefect REST calls the UI makes, done the same way."""

    def __init__(self, url: str) -> None:
        self.client = _Patient(base_url=url, timeout=30)

    def deployment(self, flow: str, name: str) -> dict[str, Any]:
        response = self.client.get(f"/deployments/name/{flow}/{name}")
        response.raise_for_status()
        return dict(response.json())

    def run_deployment(self, deployment_id: str, parameters: dict[str, Any]) -> str:
        response = self.client.post(
            f"/deployments/{deployment_id}/create_flow_run", json={"parameters": parameters}
        )
        response.raise_for_status()
        return str(response.json()["id"])

    def flow_run(self, run_id: str) -> dict[str, Any]:
        response = self.client.get(f"/flow_runs/{run_id}")
        response.raise_for_status()
        return dict(response.json())

    def flow_runs_of(self, deployment_id: str) -> list[dict[str, Any]]:
        response = self.client.post(
            "/flow_runs/filter", json={"deployments": {"id": {"any_": [deployment_id]}}}
        )
        response.raise_for_status()
        return list(response.json())

    def progress_artifacts(self, run_id: str) -> list[dict[str, Any]]:
        response = self.client.post(
            "/artifacts/filter",
            json={"artifacts": {"flow_run_id": {"any_": [run_id]}, "type": {"any_": ["progress"]}}},
        )
        response.raise_for_status()
        return list(response.json())

    def retry_from_ui(self, run_id: str) -> None:
        """What the UI's Retry button sends (prefect-ui-library's retryFlowRun)."""
        response = self.client.post(
            f"/flow_runs/{run_id}/set_state",
            json={
                "state": {
                    "type": "SCHEDULED",
                    "name": "AwaitingRetry",
                    "message": "Retry from the UI",
                },
                "force": False,
            },
        )
        response.raise_for_status()
        assert response.json()["status"] == "ACCEPT", response.json()

    def online_workers(self, pool: str) -> set[str]:
        """The workers of a pool that sent a heartbeat (as the UI's Workers tab lists them)."""
        response = self.client.post(f"/work_pools/{pool}/workers/filter", json={})
        response.raise_for_status()
        return {w["name"] for w in response.json() if w.get("status") == "ONLINE"}

    def wait(self, run_id: str, states: set[str], timeout_s: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.flow_run(run_id)
            if run["state_type"] in states:
                return run
            time.sleep(1)
        raise AssertionError(f"flow run {run_id} still {run['state_type']} after {timeout_s} s")


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@contextmanager
def background(args: list[str], env: dict[str, str], cwd: Path, log: Path) -> Iterator[None]:
    """A long-running command (serve, a worker), stopped like Ctrl-C when the block ends."""
    with log.open("w") as output:
        process = subprocess.Popen(
            args,
            env=env,
            cwd=cwd,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            yield
            assert process.poll() is None, log.read_text()[-3000:]
        finally:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def ops_env(cli: Any, **extra: str) -> dict[str, str]:
    # The runner and workers look for due runs every 2 s instead of 10 s: shorter tests.
    return {
        **cli.env,
        **ENV,
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
        "PREFECT_WORKER_QUERY_SECONDS": "2",
        **extra,
    }


def serve(cli: Any, config: Path, wh: Path, tmp_path: Path, name: str) -> Any:
    args = [str(BIN / "needlescope"), "serve", str(config), "-w", str(wh)]
    return background(args, ops_env(cli), tmp_path, tmp_path / f"{name}.log")


def query(store: Warehouse, sql: str) -> list[tuple[Any, ...]]:
    con = store.connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def graded_once(store: Warehouse, cells: int) -> None:
    per_cell = query(
        store,
        "SELECT count(DISTINCT cell_id), max(n) FROM (SELECT cell_id, count(*) n FROM answers "
        "WHERE error_kind IS NULL GROUP BY cell_id)",
    )
    assert per_cell == [(cells, 1)]
    assert query(store, "SELECT count(*) FROM failed_cells") == [(0,)]


def test_a_schedule_due_within_a_minute_runs_by_itself(
    cli, prefect_api, write_config, tmp_path: Path
) -> None:
    api = Api(prefect_api[0])
    wh = tmp_path / "wh"
    with FakeOpenAIServer(perfect_answer, seed=1) as server:
        config = write_config(
            config_text(server.base_url, "every-minute", schedule="schedule: {cron: '* * * * *'}")
        )
        with serve(cli, config, wh, tmp_path, "serve"):
            deployment = wait_for(
                lambda: _deployment_or_none(api, "sweep", "nightly-every-minute"), 60, "deployment"
            )
            assert deployment["schedules"][0]["schedule"]["cron"] == "* * * * *"
            done = wait_for(
                lambda: [
                    r for r in api.flow_runs_of(deployment["id"]) if r["state_type"] == "COMPLETED"
                ],
                200,
                "a scheduled run to complete",
            )
    run = done[0]
    # Created by the scheduler, not by hand: it carries its schedule's start time.
    assert run["auto_scheduled"] is True
    store = Warehouse(wh)
    graded_once(store, 16)
    assert server.requests >= 16
    flow_runs = {
        r[0] for r in query(store, "SELECT flow_run_id FROM runs WHERE ended_at IS NOT NULL")
    }
    assert run["id"] in flow_runs


def _deployment_or_none(api: Api, flow: str, name: str) -> dict[str, Any] | None:
    try:
        return api.deployment(flow, name)
    except httpx.HTTPError:  # not there yet, or the server not up yet
        return None


def test_retry_from_the_ui_resends_only_the_failed_cells(
    cli, prefect_api, write_config, tmp_path: Path
) -> None:
    api = Api(prefect_api[0])
    wh = tmp_path / "wh"
    with FakeOpenAIServer(perfect_answer, rates={"server_error": 0.35}, seed=4) as server:
        config = write_config(config_text(server.base_url, "ui-retry", repeats=3))
        with serve(cli, config, wh, tmp_path, "serve"):
            deployment = wait_for(
                lambda: _deployment_or_none(api, "sweep", "nightly-ui-retry"), 60, "deployment"
            )
            run_id = api.run_deployment(deployment["id"], {})
            failed_run = api.wait(run_id, TERMINAL)
            assert failed_run["state_type"] == "FAILED", failed_run["state"]
            store = Warehouse(wh)
            failed = query(store, "SELECT count(*) FROM failed_cells")[0][0]
            assert 0 < failed < 24
            assert server.requests == 24  # retries: 0, one request per cell
            # The UI's progress view of the run: cells done, graded and failed.
            shown = api.progress_artifacts(run_id)
            assert len(shown) == 1 and shown[0]["data"] == 100.0, shown
            assert shown[0]["description"].startswith(
                f"**24** of 24 cells done: {24 - failed} graded, {failed} failed"
            ), shown

            server.rates = {}
            server.reset_counts()
            api.retry_from_ui(run_id)
            retried = api.wait(run_id, {"COMPLETED", "FAILED", "CRASHED"})
            assert retried["state_type"] == "COMPLETED", retried["state"]
            assert retried["run_count"] == 2
            assert server.requests == failed  # only the failed cells were sent again
    graded_once(store, 24)
    # Both attempts of the flow run swept the same epoch.
    assert query(
        store,
        f"SELECT count(*), count(DISTINCT epoch) FROM runs WHERE flow_run_id = '{run_id}'",
    ) == [(2, 1)]


def test_rerun_failed_reruns_exactly_the_runs_unfinished_cells(
    cli, prefect_api, write_config, tmp_path: Path
) -> None:
    api = Api(prefect_api[0])
    wh = tmp_path / "wh"
    rates = {"server_error": 0.2, "empty_choices": 0.2}
    with FakeOpenAIServer(perfect_answer, rates=rates, seed=8) as server:
        config = write_config(config_text(server.base_url, "rerun", repeats=3))
        first = cli("run", str(config), "-w", str(wh), "--no-report", "--json", extra_env=ENV)
        assert first.returncode == 1, first.stderr[-2000:]
        run_id = json.loads(first.stdout)["run_id"]
        assert f"needlescope rerun {run_id}" in first.stderr
        store = Warehouse(wh)
        kinds = dict(query(store, "SELECT error_kind, count(*) FROM failed_cells GROUP BY ALL"))
        assert kinds.get("server_error") and kinds.get("empty_response"), kinds
        graded_before = {
            r[0] for r in query(store, "SELECT cell_id FROM results WHERE error_kind IS NULL")
        }

        server.rates = {}
        server.reset_counts()
        with serve(cli, config, wh, tmp_path, "serve"):
            deployment = wait_for(
                lambda: _deployment_or_none(api, "rerun-failed", "rerun-failed"), 60, "deployment"
            )
            flow_run = api.run_deployment(
                deployment["id"],
                {"run_id": run_id, "warehouse": str(wh), "error_kinds": ["server_error"]},
            )
            finished = api.wait(flow_run, TERMINAL)
            assert finished["state_type"] == "COMPLETED", finished["state"]
        assert server.requests == kinds["server_error"]
        assert dict(query(store, "SELECT error_kind, count(*) FROM failed_cells GROUP BY ALL")) == {
            "empty_response": kinds["empty_response"]
        }

        server.reset_counts()
        rest = cli("rerun", run_id, "-w", str(wh), "--no-report", extra_env=ENV)
        assert rest.returncode == 0, rest.stderr[-2000:]
        assert server.requests == kinds["empty_response"]
        again = cli("rerun", run_id, "-w", str(wh), "--no-report", extra_env=ENV)
        assert again.returncode == 0, again.stderr[-2000:]
        assert server.requests == kinds["empty_response"]  # nothing left: nothing sent
    graded_once(store, 24)
    graded_after = {
        r[0]
        for r in query(
            store,
            "SELECT cell_id FROM answers WHERE error_kind IS NULL AND run_id = '" + run_id + "'",
        )
    }
    assert graded_after == graded_before  # cells graded in the first run were never resent
    unknown = cli("rerun", "no-such-run", "-w", str(wh), extra_env=ENV)
    assert unknown.returncode == 2
    assert "run 'no-such-run' not found" in unknown.stderr


def test_workers_of_a_pool_split_one_sweep(cli, prefect_api, write_config, tmp_path: Path) -> None:
    api = Api(prefect_api[0])
    wh = tmp_path / "wh"
    pool = "ops-pool"
    # Slow enough replies that a shard outlasts a worker's 2 s poll: the idle worker takes the
    # other shard rather than the busy one taking both in turn. (0.6 s was not enough beside
    # a second test worker on 2 cores: one worker ran both shards in turn.)
    with FakeOpenAIServer(perfect_answer, seed=2, delay_s=1.5) as server:
        config = write_config(config_text(server.base_url, "pooled", repeats=4))
        deployed = cli(
            "deploy", str(config), "--pool", pool, "--shards", "2", "-w", str(wh), extra_env=ENV
        )
        assert deployed.returncode == 0, deployed.stderr[-2000:]
        deployment = api.deployment("sweep", "nightly-pooled")
        assert deployment["work_pool_name"] == pool
        assert deployment["parameters"]["shards"] == 2
        env = ops_env(cli)
        logs = [tmp_path / f"worker-{i}.log" for i in range(3)]
        # One run at a time per worker: the coordinating run holds one, the shards the others.
        workers = [
            background(
                [
                    str(BIN / "prefect"),
                    "worker",
                    "start",
                    "--pool",
                    pool,
                    "--limit",
                    "1",
                    "--name",
                    f"worker-{i}",
                ],
                env,
                tmp_path,
                logs[i],
            )
            for i in range(3)
        ]
        for worker in workers:
            worker.__enter__()
        try:
            # Every worker polling before the run exists: on a loaded machine one worker started
            # seconds before the others could otherwise take both shards in turn.
            names = {f"worker-{i}" for i in range(3)}
            deadline = time.monotonic() + 120
            while api.online_workers(pool) != names:
                assert time.monotonic() < deadline, api.online_workers(pool)
                time.sleep(0.5)
            run_id = api.run_deployment(deployment["id"], {})
            finished = api.wait(run_id, TERMINAL, timeout_s=400)
            assert finished["state_type"] == "COMPLETED", finished["state"]
        finally:
            for worker in workers:
                worker.__exit__(None, None, None)
    store = Warehouse(wh)
    graded_once(store, 32)
    assert server.requests == 32
    shard_runs = {
        r[0]: r[1]
        for r in query(
            store,
            "SELECT flow_run_id, note FROM runs WHERE note LIKE 'shard%'",
        )
    }
    assert sorted(shard_runs.values()) == ["shard 1 of 2", "shard 2 of 2"]
    per_shard = query(
        store,
        "SELECT r.flow_run_id, count(*) FROM answers a JOIN runs r USING (run_id) GROUP BY ALL",
    )
    assert {f for f, _ in per_shard} == set(shard_runs) and sum(n for _, n in per_shard) == 32

    # Each shard ran on a worker of its own.
    # Who ran what: a worker logs "Worker '<name>' submitting flow run '<id>'" when it takes a
    # run (the coordinating run's own output, in its worker's log, names the shards too). Two
    # workers polling at once may both try one run; the server lets one have it and the other
    # logs "Aborted submission of flow run '<id>'".
    def ran(log: str, run: str) -> bool:
        return (
            f"submitting flow run '{run}'" in log
            and f"Aborted submission of flow run '{run}'" not in log
        )

    texts = [log.read_text() for log in logs]
    ran_on = {
        shard: [i for i, text in enumerate(texts) if ran(text, shard)] for shard in shard_runs
    }
    seen = [
        [line for line in text.splitlines() if any(s in line for s in shard_runs)] for text in texts
    ]
    assert all(len(workers_) == 1 for workers_ in ran_on.values()), (ran_on, seen)
    assert len({w[0] for w in ran_on.values()}) == 2, (ran_on, seen)


def test_a_key_from_a_prefect_secret_block(cli, write_config, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    secret = "sk-block-9a7f3e2c11"
    saved = subprocess.run(
        [
            str(BIN / "python"),
            "-c",
            "import sys; from prefect.blocks.system import Secret; "
            "Secret(value=sys.argv[1]).save('ns-ops-key', overwrite=True)",
            secret,
        ],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert saved.returncode == 0, saved.stderr[-2000:]
    with FakeOpenAIServer(perfect_answer, seed=3, api_key=secret) as server:
        config = write_config(
            config_text(server.base_url, "secret", key="api_key_secret: ns-ops-key")
        )
        done = cli("run", str(config), "-w", str(wh), "--report-dir", str(tmp_path / "r"))
        assert done.returncode == 0, done.stderr[:1500]
        assert server.requests == 16, done.stdout
        missing = write_config(
            config_text(server.base_url, "nosecret", key="api_key_secret: ns-no-such-block"),
            "missing.yaml",
        )
        failed = cli("run", str(missing), "-w", str(wh), "--no-report")
        assert failed.returncode == 2
        assert "Prefect Secret block 'ns-no-such-block' not found" in failed.stderr
        assert server.requests == 16
    graded_once(Warehouse(wh), 16)
    for folder in (wh, tmp_path / "r"):
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def test_a_prefect_rate_limit_paces_a_models_requests(
    cli, prefect_api, write_config, tmp_path: Path
) -> None:
    api = Api(prefect_api[0])
    name = "needlescope-rate:paced"
    created = api.client.post(
        "/v2/concurrency_limits/", json={"name": name, "limit": 2, "slot_decay_per_second": 2.0}
    )
    assert created.status_code == 201, created.text
    sent: list[float] = []

    def timed(body: dict[str, Any]) -> str:
        sent.append(time.monotonic())
        return perfect_answer(body)

    try:
        with FakeOpenAIServer(timed, seed=5) as server:
            config = write_config(config_text(server.base_url, "paced", model="paced"))
            done = cli("run", str(config), "-w", str(tmp_path / "wh"), "--no-report", extra_env=ENV)
            assert done.returncode == 0, done.stderr[:1500]
            assert server.requests == 16
    finally:
        api.client.delete(f"/v2/concurrency_limits/{name}")
    # 2 slots that free at 2 a second: 16 requests take at least (16 - 2) / 2 = 7 s.
    assert sent[-1] - sent[0] >= 6.0, sent[-1] - sent[0]
    in_any_second = max(sum(1 for t in sent if s <= t < s + 1) for s in sent)
    assert in_any_second <= 4, in_any_second


def test_needlescope_server_starts_prefect_with_its_ui_and_serves(
    write_config, tmp_path: Path
) -> None:
    """`make server`: a Prefect server of its own (UI included) with the deployments served."""
    from tests.support.prefect_server import base_env, free_port

    port = free_port()
    config = write_config(config_text("http://127.0.0.1:9/v1", "served"))
    env = {**base_env(tmp_path / "home"), **ENV}
    (tmp_path / "home").mkdir()
    api = Api(f"http://127.0.0.1:{port}/api")
    args = [str(BIN / "needlescope"), "server", str(config), "--port", str(port)]
    with background(args, env, tmp_path, tmp_path / "server.log"):
        deployment = wait_for(
            lambda: _deployment_or_none(api, "sweep", "nightly-served"), 240, "the deployment"
        )
        assert deployment["schedules"][0]["schedule"]["cron"] == "0 3 * * *"
        # serve registers its deployments one after the other
        wait_for(
            lambda: _deployment_or_none(api, "rerun-failed", "rerun-failed"), 60, "rerun-failed"
        )
        ui = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert ui.status_code == 200 and "<html" in ui.text.lower()
        # The UI talks to the API on the port it was given, not on Prefect's default 4200.
        settings = httpx.get(f"http://127.0.0.1:{port}/ui-settings", timeout=10).json()
        assert settings["api_url"] == f"http://127.0.0.1:{port}/api"
    # Stopping it stops the Prefect server it started.
    wait_for(lambda: not _healthy(api), 30, "the Prefect server to stop")
    assert f"Prefect UI: http://127.0.0.1:{port}" in (tmp_path / "server.log").read_text()


def _healthy(api: Api) -> bool:
    try:
        return api.client.get("/health").status_code == 200
    except httpx.HTTPError:
        return False


def test_a_prefect_tag_limit_caps_a_models_requests_in_flight(
    cli, prefect_api, write_config, tmp_path: Path
) -> None:
    api = Api(prefect_api[0])
    tag = "needlescope-model:capped"
    created = api.client.post("/concurrency_limits/", json={"tag": tag, "concurrency_limit": 1})
    assert created.status_code in (200, 201), created.text
    try:
        with FakeOpenAIServer(perfect_answer, seed=6, delay_s=0.2) as server:
            config = write_config(config_text(server.base_url, "capped", model="capped"))
            done = cli("run", str(config), "-w", str(tmp_path / "wh"), "--no-report", extra_env=ENV)
            assert done.returncode == 0, done.stderr[-2000:]
            assert server.requests == 16
            # The model allows 4 in flight; the tag limit, set in Prefect, allows 1.
            assert server.max_in_flight == 1
    finally:
        api.client.delete(f"/concurrency_limits/tag/{tag}")
