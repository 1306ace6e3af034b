"""Every package of the source tree is installed (setup.py finds them), and every package-data
glob of pyproject.toml matches a file, so a wheel ships all of it and nothing is listed twice."""

from __future__ import annotations

import runpy
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUP = runpy.run_path(str(REPO / "setup.py"), run_name="packages")


def test_every_package_with_an_init_is_installed() -> None:
    folders: dict[str, str] = SETUP["FOLDERS"]
    found = set()
    for name, folder in folders.items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((name, *parts)))
    installed = SETUP["packages"]()
    assert found == set(installed), found ^ set(installed)
    assert len(installed) == len(set(installed))


def test_every_package_data_glob_matches_a_file() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    installed = SETUP["packages"]()
    for package, globs in setuptools["package-data"].items():
        for glob in globs:  # "*": every package; the glob must match in one of them at least
            matched = [p for p in installed if package in ("*", p) and list(_folder(p).glob(glob))]
            assert matched, f"{package}: {glob} matches nothing"


def _folder(package: str) -> Path:
    folders: dict[str, str] = SETUP["FOLDERS"]
    root = next(p for p in sorted(folders, key=len, reverse=True) if package.startswith(p))
    return REPO / folders[root] / Path(*package[len(root) :].strip(".").split("."))
