"""When Prefect's SQLite database stops being enough: K sweeps at once on one Prefect server.

For each database (Prefect's SQLite file; PostgreSQL, Debian's, started here) and each K in
``--sweeps`` (default 1, 4, 8): a fresh Prefect server on that database, then K `needlescope run`
processes started together, each its own config and warehouse of ``--cells`` recall cells
(default 2,000) against one instant fake OpenAI server (bench/server_process.py), as K
workers of a pool would run shards. Printed per (database, K): the runs that failed, the
server's errors in its log (HTTP 503s, "database is locked", tracebacks), the wall time from
the first start to the last end, cells a second over all sweeps, and the server's CPU.

`python bench/bench_prefect_database.py [--sweeps 1,4,8] [--cells 2000]
[--databases sqlite,postgresql]`
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_orchestration import config_text, perfect_answer, prefect_server_cpu_s  # noqa: E402

NEEDLESCOPE = Path(sys.executable).parent / "needlescope"
ERRORS = re.compile(r'" 503 |database is locked|Traceback|ERROR', re.IGNORECASE)


@contextlib.contextmanager
def database(kind: str) -> Iterator[str | None]:
    if kind == "sqlite":
        yield None
        return
    from tests.support.postgres import postgres_server

    with postgres_server() as url:
        yield url


def one_setting(work: Path, kind: str, sweeps: int, cells: int) -> str:
    from server_process import ServerProcess

    from needlescope.flows.local_server import running_prefect_server
    from tests.support.prefect_server import free_port

    home = work / f"prefect-{kind}-{sweeps}"
    home.mkdir()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "NS_BENCH_KEY": "sk-bench",
    }
    env.pop("PREFECT_API_URL", None)
    log = home / "server.log"
    with (
        database(kind) as url,
        running_prefect_server(
            free_port(), ui=False, env=env, log_path=log, log=lambda _: None, database=url
        ) as api,
        ServerProcess(perfect_answer, seed=5) as server,
    ):
        env["PREFECT_API_URL"] = api
        processes = []
        cpu_before = prefect_server_cpu_s()
        started = time.monotonic()
        for index in range(sweeps):
            config = work / f"{kind}-{sweeps}-{index}.yaml"
            name = f"db{kind}{sweeps}x{index}"
            config.write_text(config_text(server.base_url, name, 16, max(1, cells // 40)))
            output = (work / f"{kind}-{sweeps}-{index}.log").open("w")
            command = [str(NEEDLESCOPE), "run", str(config), "-w", str(work / f"wh-{name}")]
            processes.append(
                subprocess.Popen(
                    [*command, "--epoch", "e", "--no-report", "--json"],
                    env=env,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            )
        codes = [p.wait(timeout=3 * 3600) for p in processes]
        wall = time.monotonic() - started
        cpu_after = prefect_server_cpu_s()
    errors = sum(1 for line in log.read_text(errors="replace").splitlines() if ERRORS.search(line))
    failed = sum(1 for code in codes if code != 0)
    cpu = "?" if cpu_before is None or cpu_after is None else f"{cpu_after - cpu_before:.0f} s"
    return (
        f"{kind:10s} {sweeps} sweeps × {cells:,} cells: {failed} runs failed, {errors} error"
        f" lines in the server's log; {wall:.0f} s wall, {sweeps * cells / wall:.0f} cells/s over"
        f" all sweeps; server CPU {cpu}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", default="1,4,8")
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--databases", default="sqlite,postgresql")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ns-bench-prefect-db-"))
    print(f"K sweeps at once on one Prefect server, {args.cells:,} cells each, instant fake:")
    for kind in args.databases.split(","):
        for sweeps in [int(k) for k in args.sweeps.split(",")]:
            print(one_setting(work, kind, sweeps, args.cells), flush=True)


if __name__ == "__main__":
    main()
