"""Start-up: time from `needlescope run` to the first request the model server receives.

- cold: Prefect's ephemeral local API in a fresh PREFECT_HOME (the very first run: it
  creates Prefect's database);
- ephemeral: the same, the database already there (every later run without a server);
- warm: a `prefect server` already running (`make server`) and PREFECT_API_URL set.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
NEEDLESCOPE = Path(sys.executable).parent / "needlescope"
REPEATS = 3


def answer(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    haystack = prompt.split("<text>")[1].split("</text>")[0]
    return json.dumps(
        {str(i + 1): int(n) for i, n in enumerate(re.findall(r"(?<!\d)\d{4}(?!\d)", haystack))}
    )


def config(base_url: str) -> str:
    return f"""
name: startup
models:
  - {{name: fake, provider: openai, base_url: "{base_url}", model: m, api_key_env: NS_BENCH_KEY}}
probes:
  - {{probe: recall, lengths: [500], length_unit: chars, needle_counts: [2]}}
"""


def to_first_request(server: Any, config_path: Path, env: dict[str, str], work: Path) -> float:
    """Seconds from starting `needlescope run` to the server's first chat request."""
    server.first_at = None
    started = time.monotonic()
    done = subprocess.run(
        [
            str(NEEDLESCOPE),
            "run",
            str(config_path),
            "-w",
            str(work / "wh"),
            "--no-report",
            "--epoch",
            f"e{time.time_ns()}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 or server.first_at is None:
        raise RuntimeError(done.stderr[-2000:])
    return float(server.first_at - started)


def main() -> None:
    from needlescope.flows.local_server import running_prefect_server
    from tests.support.openai_server import FakeOpenAIServer
    from tests.support.prefect_server import base_env, free_port

    work = Path(tempfile.mkdtemp(prefix="ns-bench-startup-"))

    class Timed(FakeOpenAIServer):
        first_at: float | None = None

    def responder(body: dict[str, Any]) -> str:
        if server.first_at is None:
            server.first_at = time.monotonic()
        return answer(body)

    with Timed(responder) as server:
        path = work / "startup.yaml"
        path.write_text(config(server.base_url))
        results: dict[str, list[float]] = {"cold": [], "ephemeral": [], "warm": []}
        for i in range(REPEATS):
            home = work / f"cold-{i}"
            home.mkdir()
            env = {**base_env(home), "NS_BENCH_KEY": "sk-bench"}
            results["cold"].append(to_first_request(server, path, env, work))
            results["ephemeral"].append(to_first_request(server, path, env, work))
        home = work / "warm"
        home.mkdir()
        env = {**base_env(home), "NS_BENCH_KEY": "sk-bench"}
        with running_prefect_server(
            free_port(), ui=False, env=env, log_path=work / "server.log", log=lambda _: None
        ) as api:
            env["PREFECT_API_URL"] = api
            to_first_request(server, path, env, work)  # the server's own first-use work
            for _ in range(REPEATS):
                results["warm"].append(to_first_request(server, path, env, work))
    print(f"time from `needlescope run` to the first request (median of {REPEATS}; min–max):")
    for name, values in results.items():
        print(
            f"  {name:9s} {statistics.median(values):5.1f} s  ({min(values):.1f}–{max(values):.1f})"
        )
    print(f"warm target ≤ 5 s: {'met' if statistics.median(results['warm']) <= 5 else 'missed'}")


if __name__ == "__main__":
    main()
