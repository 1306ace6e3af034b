"""The probe views that name their probes or epochs (so DuckDB filters below `results`'
window) name every probe or epoch that writes their rows."""

from __future__ import annotations

import re
from importlib import resources

from needlescope.probes.cases import probe as cases
from needlescope.probes.catalog import specs
from needlescope.probes.registry import probe_module
from needlescope.warehouse.store.tool_import import TOOLS, tool_epoch


def sql(name: str, package: str = "needlescope.warehouse.store") -> str:
    return resources.files(package).joinpath(name).read_text()


def named_probes(text: str, view: str) -> set[str]:
    body = text[text.index(f"CREATE OR REPLACE VIEW {view} AS") :].split(";")[0]
    (listed,) = re.findall(r"r\.probe IN \(([^)]*)\)", body)
    return {name.strip().strip("'") for name in listed.split(",")}


def test_distractor_results_names_every_probe_grading_distractors() -> None:
    grading = {name for name in specs() if probe_module(name).grade is cases.grade}
    assert grading == {"cases", "rag"}
    views = sql("views_distractors.sql", "needlescope.warehouse.probes.cases")
    assert named_probes(views, "distractor_results") == grading


def test_ruler_outcomes_names_every_ruler_family() -> None:
    families = {name for name, spec in specs().items() if spec.ruler}
    views = sql("views.sql", "needlescope.warehouse.probes.ruler")
    assert named_probes(views, "ruler_outcomes") == families
    assert named_probes(views, "ruler_results") == families


def test_imported_cells_reads_the_epochs_imports_write() -> None:
    assert "starts_with(r.epoch, 'legacy-')" in sql("views_imports.sql")
    assert all(tool_epoch(tool, "m").startswith("legacy-") for tool in TOOLS)
