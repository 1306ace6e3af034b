"""`needlescope server --port N` serves a UI that talks to the API on N, not on Prefect's
default 4200: its /ui-settings names http://127.0.0.1:N/api."""

from __future__ import annotations

from pathlib import Path

import httpx

from needlescope.flows.local_server import running_prefect_server
from tests.support.prefect_server import base_env, free_port


def test_the_ui_uses_the_port_it_was_given(tmp_path: Path) -> None:
    port = free_port()
    env = base_env(tmp_path)
    # A stale setting of the user's would send the UI elsewhere: the port given wins.
    env["PREFECT_UI_API_URL"] = "http://127.0.0.1:4200/api"
    with running_prefect_server(
        port, env=env, log_path=tmp_path / "server.log", log=lambda _: None
    ) as api_url:
        assert api_url == f"http://127.0.0.1:{port}/api"
        settings = httpx.get(f"http://127.0.0.1:{port}/ui-settings", timeout=30).json()
    assert settings["api_url"] == f"http://127.0.0.1:{port}/api"
