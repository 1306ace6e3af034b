from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Wall-clock limits are for bench/, not tests: a loaded CI machine must not fail a property.
settings.register_profile("needlescope", deadline=None)
settings.load_profile("needlescope")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# Prefect state for the test session stays in a throwaway folder, never the user's ~/.prefect.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# `make test` runs two xdist workers on 2 cores. llama.cpp's threads spin while they wait for
# each other: a local model with a thread per core beside the other worker took up to 5 times
# as long (and the CPU it burnt), so each local model started by a worker gets one thread.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("NEEDLESCOPE_LOCAL_THREADS", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--live", action="store_true", help="run tests against real remote APIs")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--live"):
        return
    skip_live = pytest.mark.skip(reason="live API test: pass --live and set the key")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip_live)


@pytest.fixture
def write_config(tmp_path: Path):
    def write(text: str, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory):
    """A real Prefect server on 127.0.0.1 for the pytest run: (api_url, prefect_home)."""
    from tests.support.prefect_server import prefect_server

    home = tmp_path_factory.mktemp("prefect-home")
    with prefect_server(home) as api:
        yield api, home


@pytest.fixture
def cli(prefect_api, tmp_path: Path):
    """Run `needlescope …` in a subprocess against the session's Prefect server."""
    from tests.support.prefect_server import cli_env, run_cli

    api, home = prefect_api
    env = cli_env(home, api)

    def invoke(*args: str, timeout_s: float = 900, extra_env: dict[str, str] | None = None):
        return run_cli(list(args), {**env, **(extra_env or {})}, tmp_path, timeout_s)

    invoke.env = env  # type: ignore[attr-defined]
    return invoke
