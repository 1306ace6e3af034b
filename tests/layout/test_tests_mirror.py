"""The tests mirror the packages: the tests of ``needlescope/probes/ruler`` are in
``tests/probes/ruler``, those of ``flows/cli`` in ``tests/flows/cli``. Two folders stand apart:
``tests/e2e`` (whole sweeps on the local model) and ``tests/layout`` (rules over the whole tree)."""

from __future__ import annotations

from pathlib import Path

from tests.layout.test_import_rules import FOLDERS, ROOT

TESTS = ROOT / "tests"
APART = {"e2e", "layout"}


def _source_folder(relative: Path) -> Path | None:
    """The source folder a test folder mirrors: a top-level folder of the layout or the core's."""
    candidate = ROOT / relative if relative.parts[0] in FOLDERS else ROOT / "needlescope" / relative
    return candidate if (candidate / "__init__.py").is_file() else None


def test_every_test_folder_mirrors_a_package() -> None:
    folders = {path.parent for path in TESTS.rglob("test_*.py")}
    astray = sorted(
        str(folder.relative_to(TESTS)) or "."
        for folder in folders
        if folder == TESTS
        or (
            folder.relative_to(TESTS).parts[0] not in APART
            and _source_folder(folder.relative_to(TESTS)) is None
        )
    )
    assert not astray, f"test folders that mirror no package: {astray}"


def test_the_rule_finds_a_folder_that_mirrors_nothing() -> None:
    assert _source_folder(Path("probes/ruler")) is not None
    assert _source_folder(Path("flows/cli")) is not None
    assert _source_folder(Path("unit")) is None
