"""Loading a sweep config from its YAML file: the file's paths resolved against its folder,
its corpora, case files and rubrics read and checked, and the grid counted (``max_cells``)
before a cell is made. Every error is one line naming the file and the field, before Prefect is
imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlescope.config._paths import dir_problem, file_problem
from needlescope.config._sweep import FillerSpec, SweepConfig, one_line, parse_config
from needlescope.errors import ConfigError
from needlescope.probes.cases.entry import CasesProbe


def load_config(path: str | Path) -> SweepConfig:
    from needlescope.config._yaml import read_yaml

    path = Path(path)
    config = parse_config(read_yaml(path), str(path))
    config = _resolve_relative_paths(config, path)
    _check_grid_size(config, path)
    return config


def _check_grid_size(config: SweepConfig, source: Path) -> None:
    """A grid past ``max_cells`` is refused before a cell is made (it is counted, not built)."""
    from needlescope.grid import grid_sizes

    sizes = grid_sizes(config)
    total = sum(sizes)
    if total > config.max_cells:
        largest = max(range(len(sizes)), key=sizes.__getitem__)
        raise ConfigError(
            f"{source}: max_cells: the grid would make {total:,} cells (probes.{largest}:"
            f" {sizes[largest]:,}), more than max_cells ({config.max_cells:,}); shrink the grid"
            " or raise max_cells"
        )


def _resolve_relative_paths(config: SweepConfig, source: Path) -> SweepConfig:
    """Corpus paths in a config are relative to the config file, as a user reading it expects."""
    base = source.parent
    fillers = {
        name: spec.model_copy(update={"path": (base / spec.path)})
        if spec.path is not None and not spec.path.is_absolute()
        else spec
        for name, spec in config.fillers.items()
    }
    for name, spec in fillers.items():
        if spec.kind == "corpus" and spec.path is not None:
            _check_corpus(spec, f"{source}: fillers.{name}.path")
    probes = [_resolve_probe_paths(probe, base) for probe in config.probes]
    for index, probe in enumerate(probes):
        for name in ("cases_file", "rubric_file"):
            path = getattr(probe, name, None)
            if isinstance(path, Path) and (problem := file_problem(path)) not in (
                None,
                "not found",
            ):
                raise ConfigError(f"{source}: probes.{index}.{name}: {path}: {problem}")
        if isinstance(probe, CasesProbe):  # a bad case file fails here, before Prefect starts
            from needlescope.probes.cases.case_file import load_cases

            load_cases(probe.cases_file, probe.cases)
        if isinstance(probe, CasesProbe) and probe.judge and probe.rubric_file:
            from needlescope.grading import load_rubric

            load_rubric(probe.rubric_file)
    return config.model_copy(update={"fillers": fillers, "probes": probes})


def _check_corpus(spec: FillerSpec, where: str) -> None:
    """A corpus folder (or, used as it is, a file) whose every .txt entry is a regular UTF-8
    file: a folder named x.txt, a pipe or a symlink loop would fail the sweep mid-way."""
    from needlescope.grid import filler_identity

    assert spec.path is not None
    path = spec.path
    whole_files = spec.as_is or spec.paper  # these take one file as well as a folder
    if whole_files and file_problem(path) is None:
        entries = [path]
    else:
        problem = dir_problem(path)
        if problem == "not found":
            kind = "not found" if whole_files else "corpus directory not found"
            raise ConfigError(f"{where}: {kind}: {path}")
        if problem is not None:
            raise ConfigError(f"{where}: {path}: {problem}")
        entries = sorted(p for p in path.iterdir() if p.suffix == ".txt")
    if not entries:
        raise ConfigError(f"{where}: no .txt files in {path}")
    for entry in entries:
        if (problem := file_problem(entry)) is not None:
            raise ConfigError(f"{where}: {entry}: {problem}")
    # Each haystack is read once here (cached for the sweep), so bad text fails now.
    specs = [spec.model_copy(update={"path": e}) for e in entries] if spec.as_is else [spec]
    try:
        for each in specs:
            filler_identity(each)
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: a .txt file in {path} is not UTF-8 text") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(one_line(f"{where}: {path}: {exc}")) from None


def _resolve_probe_paths(probe: Any, base: Path) -> Any:
    updates = {
        name: base / value
        for name in ("cases_file", "rubric_file")
        if isinstance(value := getattr(probe, name, None), Path) and not value.is_absolute()
    }
    return probe.model_copy(update=updates) if updates else probe
