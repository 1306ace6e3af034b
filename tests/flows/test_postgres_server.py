"""A Prefect server on PostgreSQL (``needlescope server --database URL``): Prefect's supported
setup for a server many workers share, here on Debian's PostgreSQL started by the test. A sweep
runs on it and its flow run lands in PostgreSQL; a URL that is not one fails in one line,
its password never shown."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import asyncpg

from needlescope.flows.local_server import running_prefect_server
from tests.flows.test_operations import ENV, config_text, perfect_answer
from tests.support.openai_server import FakeOpenAIServer
from tests.support.postgres import postgres_server
from tests.support.prefect_server import base_env, cli_env, free_port, run_cli


async def _count(url: str, sql: str) -> int:
    connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        return int(await connection.fetchval(sql))
    finally:
        await connection.close()


def test_a_sweep_runs_on_a_prefect_server_backed_by_postgresql(
    write_config, tmp_path: Path
) -> None:
    home = tmp_path / "prefect"
    home.mkdir()
    with (
        postgres_server() as url,
        running_prefect_server(
            free_port(),
            ui=False,
            env=base_env(home),
            log_path=home / "server.log",
            log=lambda _: None,
            # as a user writes it: the server's async driver is added
            database=url.replace("postgresql+asyncpg://", "postgresql://"),
        ) as api,
        FakeOpenAIServer(perfect_answer, seed=3) as fake,
    ):
        config = write_config(config_text(fake.base_url, "pg", repeats=1))
        done = run_cli(
            ["run", str(config), "-w", str(tmp_path / "wh"), "--no-report", "--json"],
            cli_env(home, api) | ENV,
            tmp_path,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout)["cells_graded"] == 8
        runs = asyncio.run(
            _count(url, "SELECT count(*) FROM flow_run WHERE state_type = 'COMPLETED'")
        )
        assert runs == 1
        assert asyncio.run(_count(url, "SELECT count(*) FROM task_run")) > 0
    assert not (home / "prefect.db").exists()  # nothing went to Prefect's SQLite file


def test_a_database_that_is_not_postgresql_or_sqlite_fails_in_one_line(cli, tmp_path: Path) -> None:
    demo = str(Path(__file__).resolve().parents[2] / "configs" / "demo.yaml")
    done = cli("server", demo, "--database", "mysql://ns:s3cret-pw@db:3306/prefect")
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a PostgreSQL or SQLite URL" in lines[0], done.stderr
    assert "s3cret-pw" not in done.stderr + done.stdout
    assert "mysql://ns:***@db:3306/prefect" in lines[0]
