"""A real `prefect server` on 127.0.0.1 for as long as a block runs (`needlescope server`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from needlescope.errors import NeedlescopeError
from needlescope.flows.retention import with_retention

PREFECT = Path(sys.executable).parent / "prefect"

# A sweep emits three events per task run, 200 a second at 64 requests in flight. Prefect's
# defaults record each task run event in a transaction of its own (and the event feed 20 at a
# time): at that rate the server then takes a whole core of two. Batched, the UI shows a task
# run's state at most a second late.
BATCHED_RECORDING = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL": "1",
}


DRIVERS = {  # what a user writes -> the async driver Prefect's server needs
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
}


def database_url(url: str) -> str:
    """``url`` as Prefect's server connects to it (``postgresql://`` gains ``+asyncpg``);
    a one-line error for anything that is not a PostgreSQL or SQLite URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in DRIVERS or not rest:
        raise NeedlescopeError(
            f"--database: not a PostgreSQL or SQLite URL: {redacted(url)!r} (e.g. "
            "postgresql://user:password@127.0.0.1:5432/prefect)"
        )
    return f"{DRIVERS[scheme.lower()]}://{rest}"


def redacted(url: str) -> str:
    """``url`` with its password hidden (for logs and errors)."""
    scheme, sep, rest = url.partition("://")
    who, at, where = rest.rpartition("@")
    if not sep or not at or ":" not in who:
        return url
    return f"{scheme}://{who.split(':', 1)[0]}:***@{where}"


def healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def running_prefect_server(
    port: int,
    *,
    ui: bool = True,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    timeout_s: float = 180,
    log: Callable[[str], object] = print,
    database: str | None = None,
) -> Iterator[str]:
    """The API URL of a Prefect server on ``port``: one already answering there, or one
    started now and stopped when the block ends. ``database``: its database's URL
    (PostgreSQL for a server many workers share); default Prefect's SQLite file."""
    api_url = f"http://127.0.0.1:{port}/api"
    if healthy(api_url):
        log(f"using the Prefect server already running at {api_url}")
        yield api_url
        return
    server_env = dict(env if env is not None else os.environ)
    server_env.pop("PREFECT_API_URL", None)
    server_env["PREFECT_UI_ENABLED"] = "true" if ui else "false"
    # Unset, the UI's API URL is made from PREFECT_SERVER_API_PORT (4200), not from --port.
    server_env.pop("PREFECT_UI_API_URL", None)
    server_env["PREFECT_SERVER_UI_API_URL"] = api_url
    for name, value in BATCHED_RECORDING.items():
        server_env.setdefault(name, value)  # what the user set wins
    with_retention(server_env)
    if database is not None:
        server_env["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = database_url(database)
    output = log_path.open("w") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        [str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=server_env,
        stdout=output,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        on = f" on {redacted(database)}" if database else ""
        log(f"starting a Prefect server on 127.0.0.1:{port}{on} …")
        deadline = time.monotonic() + timeout_s
        while not healthy(api_url):
            if process.poll() is not None:
                where = f"; see {log_path}" if log_path else ""
                raise NeedlescopeError(
                    f"prefect server exited with code {process.returncode}{where}"
                )
            if time.monotonic() > deadline:
                raise NeedlescopeError(f"prefect server did not answer within {timeout_s:.0f} s")
            time.sleep(0.5)
        yield api_url
    finally:
        stop(process)
        if log_path and not isinstance(output, int):
            output.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
