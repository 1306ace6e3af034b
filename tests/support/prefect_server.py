"""A real `prefect server` on 127.0.0.1 for the test session, and the CLI run against it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from needlescope.flows.local_server import running_prefect_server

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
    with running_prefect_server(
        free_port(),
        ui=False,
        env=base_env(home),
        log_path=home / "server.log",
        timeout_s=timeout_s,
        log=lambda _: None,
    ) as api:
        yield api


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
