"""Gates and alerts end to end on the session's Prefect server: `deploy` creates the config's
automation once (and shows schedule, gates and notify in the deployment's description); a
sweep that fails its gate ends Failed with the gate's message, exits 4, and the generic webhook
behind the notification block receives the gate's name and figures; the same sweep meeting its
gate ends Completed and sends nothing. The model is the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from needlescope.warehouse.store import Warehouse
from tests.flows.test_operations import ENV, Api, perfect_answer
from tests.support.openai_server import FakeOpenAIServer

BLOCK = "ns-gate-webhook"


class Receiver:
    """A local aiohttp server on its own thread, keeping every JSON body POSTed to /hook."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="webhook-receiver")

    async def _hook(self, request: web.Request) -> web.Response:
        self.posts.append(await request.json())
        return web.Response(text="ok")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self.runner = web.AppRunner(app)
        self._loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self.runner.cleanup())

    def __enter__(self) -> Receiver:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


def config_text(base_url: str, name: str) -> str:
    # 12 cells at one length: a gate judges 10 answers or more.
    return f"""
name: {name}
seed: 3
retry: {{retries: 0, backoff_s: [0]}}
schedule: {{cron: "30 2 * * *", timezone: Europe/Paris}}
models:
  - name: fake
    provider: openai
    base_url: {base_url}
    model: fake-model
    api_key_env: NS_FAKE_KEY
    concurrency: 4
probes:
  - probe: recall
    lengths: [500]
    length_unit: chars
    needle_counts: [1, 3]
    fillers: [pattern]
    repeats: 6
gates:
  - {{probe: recall, min_accuracy: 90}}
notify: {{block: {BLOCK}}}
"""


def wrong_answer(body: dict[str, Any]) -> str:
    return json.dumps({"1": 1})


def save_webhook_block(env: dict[str, str], url: str) -> None:
    script = (
        "import sys\n"
        "from prefect.blocks.notifications import CustomWebhookNotificationBlock as B\n"
        "B(name='needlescope test', url=sys.argv[1], allow_private_urls=True,\n"
        "  json_data={'subject': '{{subject}}', 'body': '{{body}}'}).save(sys.argv[2],"
        " overwrite=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, url, BLOCK], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


def automations(api_url: str, name: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{api_url}/automations/filter", json={}, timeout=30)
    response.raise_for_status()
    return [a for a in response.json() if a["name"] == name]


def wait_for_posts(receiver: Receiver, count: int, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while len(receiver.posts) < count and time.monotonic() < deadline:
        time.sleep(0.5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def test_a_failed_gate_fails_the_run_and_alerts_a_met_one_does_not(
    cli: Any, prefect_api: Any, write_config: Any, receiver: Receiver, tmp_path: Path
) -> None:
    api_url, _ = prefect_api
    api = Api(api_url)
    save_webhook_block(cli.env, receiver.url)
    name = "gated"
    # Every answer wrong, and the first request fails: one failed cell.
    with FakeOpenAIServer(wrong_answer, script=["server_error"], seed=5) as model:
        config = write_config(config_text(model.base_url, name))
        wh = tmp_path / "wh"
        for _ in range(2):  # the automation is created once, then kept
            deployed = cli("deploy", str(config), "--pool", "gates-pool", "-w", str(wh))
            assert deployed.returncode == 0, deployed.stderr[-2000:]
        assert "already go to" in deployed.stderr
        [automation] = automations(api_url, f"needlescope-alerts-{name}")
        assert set(automation["trigger"]["expect"]) == {
            "needlescope.gate.failed",
            "needlescope.sweep.failed-cells",
        }
        description = api.deployment("sweep", f"nightly-{name}")["description"]
        assert "`30 2 * * *` in time zone Europe/Paris" in description
        assert "gates: recall min_accuracy 90" in description
        assert f"notification block `{BLOCK}`" in description

        failed = cli("run", str(config), "-w", str(wh), "--no-report", "--json", extra_env=ENV)
    assert failed.returncode == 4, failed.stderr[-3000:]
    assert "gate recall min_accuracy 90 failed: model fake: at 500 chars: accuracy 0.0" in (
        failed.stderr
    )
    summary = json.loads(failed.stdout)
    [entry] = summary["gates"]
    assert (entry["gate"], entry["model"], entry["status"]) == (
        "recall min_accuracy 90",
        "fake",
        "failed",
    )
    assert entry["figures"][0]["answers"] == 11 and entry["figures"][0]["mean"] == 0.0
    assert summary["cells_failed"] == 1
    runs = httpx.post(
        f"{api_url}/flow_runs/filter",
        json={"flow_runs": {"state": {"type": {"any_": ["FAILED"]}}}, "sort": "START_TIME_DESC"},
        timeout=30,
    ).json()
    messages = [r["state"]["message"] or "" for r in runs]
    assert any(m.startswith("gate recall min_accuracy 90 failed: model fake") for m in messages)

    wait_for_posts(receiver, 2)
    assert len(receiver.posts) == 2, receiver.posts
    posts = {p["subject"]: p["body"] for p in receiver.posts}
    body = posts[f"needlescope {name}: needlescope.gate.failed"]
    assert "gate recall min_accuracy 90 failed: model fake" in body
    figures = json.loads(body.split("figures: ", 1)[1].split("\n", 1)[0])
    assert figures[0]["answers"] == 11 and figures[0]["length"] == 500
    assert figures[0]["hi"] < 90
    cells = posts[f"needlescope {name}: needlescope.sweep.failed-cells"]
    assert f"sweep {name} epoch" in cells and "1 cells failed" in cells
    assert json.loads(cells.split("figures: ", 1)[1].split("\n", 1)[0])["cells_total"] == 12

    # Every answer carries what served it: the backend and the sampling sent.
    con = Warehouse(wh).connect()
    served = con.sql(
        "SELECT DISTINCT model_version, system_fingerprint, sampling, template_sha256 IS NOT NULL"
        " FROM results WHERE error_kind IS NULL"
    ).fetchall()
    con.close()
    assert {(r[0], r[1], r[3]) for r in served} == {("fake-model", "fp_fake", True)}
    # The answer limit differs per needle count: the sampling sent says so, cell by cell.
    assert sorted(json.loads(r[2])["max_tokens"] for r in served) == [44, 68]
    assert {json.loads(r[2])["temperature"] for r in served} == {0.0}

    # The same sweep with the gate met: Completed, exit 0, nothing sent.
    receiver.posts.clear()
    with FakeOpenAIServer(perfect_answer, seed=6) as model:
        config = write_config(config_text(model.base_url, name))
        met = cli(
            "run", str(config), "-w", str(tmp_path / "wh2"), "--no-report", "--json", extra_env=ENV
        )
    assert met.returncode == 0, met.stderr[-3000:]
    [entry] = json.loads(met.stdout)["gates"]
    assert entry["status"] == "passed"
    latest = httpx.post(
        f"{api_url}/flow_runs/filter",
        json={
            "flow_runs": {"state": {"type": {"any_": ["COMPLETED", "FAILED"]}}},
            "sort": "START_TIME_DESC",
            "limit": 1,
        },
        timeout=30,
    ).json()[0]
    assert latest["state"]["type"] == "COMPLETED", latest["state"]
    time.sleep(10)  # what an alert would take to arrive
    assert receiver.posts == []


def test_on_the_ephemeral_api_gates_still_fail_the_run_and_one_line_says_no_alert(
    write_config: Any, tmp_path: Path
) -> None:
    """A plain `needlescope run` (no Prefect server): exit 4, and no alert, said once."""
    from tests.support.prefect_server import base_env, run_cli

    home = tmp_path / "home"
    home.mkdir()
    with FakeOpenAIServer(wrong_answer, seed=7) as model:
        config = write_config(config_text(model.base_url, "alone"))
        done = run_cli(
            ["run", str(config), "-w", str(tmp_path / "wh"), "--no-report", "--json"],
            {**base_env(home), **ENV},
            tmp_path,
        )
    assert done.returncode == 4, done.stderr[-3000:]
    assert "gate recall min_accuracy 90 failed: model fake" in done.stderr
    said = " ".join(done.stderr.split())
    assert said.count("no alert was sent: no Prefect server is configured") == 1
    assert json.loads(done.stdout)["alerts_sent"] == 0
