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
) -> Iterator[str]:
    """The API URL of a Prefect server on ``port``: one already answering there, or one
    started now and stopped when the block ends."""
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
        log(f"starting a Prefect server on 127.0.0.1:{port} …")
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
