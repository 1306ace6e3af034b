"""Small modules and short functions: a module over 400 lines, or one with a function over 60,
says why in its first 10 lines (the words "400 lines" or "60 lines" mark the reason); a module's
docstring stays within 12 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("needlescope", "flows", "tasks", "warehouse")
MAX_MODULE, MAX_FUNCTION = 400, 60


def _too_long() -> list[str]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            head = "\n".join(text.splitlines()[:10])
            functions = [
                node
                for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.end_lineno is not None
                and node.end_lineno - node.lineno + 1 > MAX_FUNCTION
            ]
            name = path.relative_to(ROOT)
            if len(text.splitlines()) > MAX_MODULE and f"{MAX_MODULE} lines" not in head:
                found.append(f"{name}: {len(text.splitlines())} lines, no reason given")
            if functions and f"{MAX_FUNCTION} lines" not in head:
                found += [f"{name}:{f.lineno} {f.name}: no reason given" for f in functions]
    return found


def test_long_modules_and_functions_say_why() -> None:
    assert _too_long() == []


MAX_DOCSTRING = 12  # lines: a summary and a short paragraph; the reasoning is in docs/design/


def _long_docstrings() -> list[str]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
            lines = 0 if docstring is None else docstring.strip("\n").count("\n") + 1
            if lines > MAX_DOCSTRING:
                found.append(f"{path.relative_to(ROOT)}: module docstring of {lines} lines")
    return found


def test_module_docstrings_stay_short() -> None:
    assert _long_docstrings() == []
