"""A real `prefect server` on 127.0.0.1 for the test session, and the CLI run against it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def base_env(prefect_home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PREFECT_HOME=str(prefect_home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        PREFECT_LOGGING_LEVEL="INFO",
    )
    env.pop("PREFECT_API_URL", None)
    return env


@contextmanager
def prefect_server(home: Path, timeout_s: float = 180) -> Iterator[str]:
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = base_env(home)
    env["PREFECT_UI_ENABLED"] = "false"
    log = (home / "server.log").open("w")
    process = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    api = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"prefect server exited: {(home / 'server.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{api}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("prefect server did not become healthy")
            time.sleep(0.5)
        yield api
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def cli_env(prefect_home: Path, api_url: str) -> dict[str, str]:
    env = base_env(prefect_home)
    env["PREFECT_API_URL"] = api_url
    env["COLUMNS"] = "200"
    return env


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "needlescope"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )
