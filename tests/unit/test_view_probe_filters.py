"""The probe views that name their probes or epochs (so DuckDB filters below `results`'
window) name every probe or epoch that writes their rows."""

from __future__ import annotations

import re
from importlib import resources

from needlescope.probes import cases
from needlescope.probes.registry import MODULES, probe_module
from needlescope.warehouse.store.tool_import import TOOLS, tool_epoch


def sql(name: str) -> str:
    return resources.files("needlescope.warehouse.store").joinpath(name).read_text()


def named_probes(text: str, view: str) -> set[str]:
    body = text[text.index(f"CREATE OR REPLACE VIEW {view} AS") :].split(";")[0]
    (listed,) = re.findall(r"r\.probe IN \(([^)]*)\)", body)
    return {name.strip().strip("'") for name in listed.split(",")}


def test_distractor_results_names_every_probe_grading_distractors() -> None:
    grading = {name for name in MODULES if probe_module(name).grade is cases.grade}
    assert grading == {"cases", "rag"}
    assert named_probes(sql("views_distractors.sql"), "distractor_results") == grading


def test_ruler_outcomes_names_every_ruler_family() -> None:
    families = {name for name, module in MODULES.items() if ".ruler." in module}
    assert named_probes(sql("views_ruler.sql"), "ruler_outcomes") == families
    assert named_probes(sql("views_ruler.sql"), "ruler_results") == families


def test_imported_cells_reads_the_epochs_imports_write() -> None:
    assert "starts_with(r.epoch, 'legacy-')" in sql("views_imports.sql")
    assert all(tool_epoch(tool, "m").startswith("legacy-") for tool in TOOLS)
