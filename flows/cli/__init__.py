"""The ``needlescope`` command line: a typer app whose commands start the flows (so it sits above
them). Only the commands that orchestrate import Prefect; the others stay fast paths."""

from __future__ import annotations

from needlescope.flows.cli._app import app, main

__all__ = ["app", "main"]
