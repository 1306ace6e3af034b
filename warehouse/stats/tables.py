"""The statistics table on disk: CSV, and an Excel workbook with one sheet per model."""

from __future__ import annotations

import re
from collections.abc import Iterable
from copy import copy
from pathlib import Path

import polars as pl
from openpyxl import Workbook
from openpyxl.styles import Font, PatternFill
from openpyxl.styles.cell_style import StyleArray
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

SHEET_NAME_LIMIT = 31
_SHEET_FORBIDDEN = re.compile(r"[\[\]:*?/\\]")
_UNSTABLE_FILL = PatternFill("solid", fgColor="FDE2E1")
_FORMATS = {
    "parse_failure_rate": "0.0%",
    "parse_failure_lo": "0.0%",
    "parse_failure_hi": "0.0%",
    "mean_latency_s": "0.00",
}
_ACCURACY_FORMAT = "0.00"


def sheet_names(models: Iterable[str]) -> dict[str, str]:
    """A valid, unique Excel sheet name for every model (31 characters, no []:*?/\\)."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for model in models:
        base = _SHEET_FORBIDDEN.sub("_", model).strip("'") or "model"
        name = base[:SHEET_NAME_LIMIT]
        counter = 2
        while name.lower() in taken:
            suffix = f"~{counter}"
            name = base[: SHEET_NAME_LIMIT - len(suffix)] + suffix
            counter += 1
        taken.add(name.lower())
        names[model] = name
    return names


def write_csv(stats: pl.DataFrame, path: Path) -> Path:
    stats.write_csv(path, float_precision=4)
    return path


def _number_format(column: str) -> str | None:
    if column in _FORMATS:
        return _FORMATS[column]
    if "accuracy" in column or column.startswith("ci95") or column == "accuracy_range":
        return _ACCURACY_FORMAT
    return None


def write_excel(stats: pl.DataFrame, path: Path, by: str = "model") -> Path:
    """One sheet per value of ``by`` (a model), header frozen, unstable rows shaded."""
    workbook = Workbook()
    default = workbook.active
    groups = stats.partition_by(by, maintain_order=True, as_dict=True) if stats.height else {}
    names = sheet_names(str(key[0]) for key in groups)
    for key, frame in groups.items():
        _write_sheet(workbook.create_sheet(names[str(key[0])]), frame)
    if default is not None:
        if groups:
            workbook.remove(default)
        else:
            default.title = "no data"
            default.append(["No answers in the warehouse yet."])
    workbook.save(path)
    return path


def _width(column: str, values: list[object]) -> int:
    longest = max([len(column), *(8 if isinstance(v, float) else len(str(v)) for v in values)])
    return min(max(8, longest + 2), 40)


def _write_sheet(sheet: Worksheet, frame: pl.DataFrame) -> None:
    sheet.append(frame.columns)
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    sheet.freeze_panes = "A2"
    unstable = frame.columns.index("unstable") if "unstable" in frame.columns else None
    formats = [_number_format(column) for column in frame.columns]
    # Setting a style through openpyxl hashes the style object each time (seconds for a few
    # thousand cells): style the first cell of each (column, shaded) kind, copy its style array.
    styles: dict[tuple[int, bool], StyleArray] = {}
    for row_index, row in enumerate(frame.iter_rows(), start=2):
        sheet.append(list(row))
        shaded = unstable is not None and bool(row[unstable])
        for column_index, number_format in enumerate(formats, start=1):
            if number_format is None and not shaded:
                continue
            cell = sheet.cell(row=row_index, column=column_index)
            kind = (column_index, shaded)
            if kind in styles:
                cell._style = copy(styles[kind])
                continue
            if number_format:
                cell.number_format = number_format
            if shaded:
                cell.fill = _UNSTABLE_FILL
            styles[kind] = copy(cell._style)
    for index, column in enumerate(frame.columns, start=1):
        letter = get_column_letter(index)
        sheet.column_dimensions[letter].width = _width(column, frame[column].head(200).to_list())
    sheet.auto_filter.ref = sheet.dimensions
