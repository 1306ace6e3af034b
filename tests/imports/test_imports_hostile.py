"""Whatever a result file holds, a reader returns records or raises ImportFormatError, with a
one-line message that starts with the file's path: never another exception."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.imports import (
    ImportFormatError,
    read_counting_stars,
    read_gkamradt,
    read_ruler,
    read_uniah,
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

# Each reader, the file name it reads, and a valid object of its files.
READERS: dict[str, tuple[Callable[[Path], list[Any]], str, dict[str, Any]]] = {
    "gkamradt": (
        read_gkamradt,
        "m_len_1000_depth_5000_results.json",
        {
            "model": "m",
            "context_length": 1000,
            "depth_percent": 50.0,
            "version": 1,
            "needle": "The kettle is blue.",
            "model_response": "Blue.",
            "score": 10,
            "test_duration_seconds": 1.5,
            "test_timestamp_utc": "2024-05-02 09:15:30+0000",
        },
    ),
    "counting_stars": (
        read_counting_stars,
        "EN_m_32_32.txt",
        {
            "code": 0,
            "answer": '{"little_penguin": [1, 2]}',
            "question": "A penguin counted 1 star. Then 2. List them.",
            "model_name": "m",
            "sky_size": 100,
            "retrieval_question": "List them.",
            "reference_counting_results": [1, 2],
            "parameters": {"temperature": 0.0},
            "prompt_tokens": 20,
            "completion_tokens": 8,
        },
    ),
    "uniah": (
        read_uniah,
        "results/exp/m/m_len_1000_depth_5000_results.json",
        {
            "model": "m",
            "context_length": 1000,
            "depth_percent": 50.0,
            "version": 1,
            "needles": ["A needle."],
            "model_response": "A reply.",
            "score": -1,
            "test_duration_seconds": 1.5,
            "test_timestamp_utc": "2024-05-02 09:15:30+0000",
        },
    ),
    "ruler": (
        read_ruler,
        "4096/pred/niah_single_1.jsonl",
        {
            "index": 0,
            "pred": "42",
            "input": "The number? Answer:",
            "outputs": ["42"],
            "others": {"id": "a"},
            "truncation": -1,
            "length": 30,
        },
    ),
}


def read(tool: str, content: bytes) -> None:
    reader, name, _ = READERS[tool]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        try:
            reader(Path(folder))
        except ImportFormatError as error:
            assert str(error).startswith(str(path))
            assert "\n" not in str(error) and "\r" not in str(error)


@settings(max_examples=150, deadline=None)
@given(tool=st.sampled_from(sorted(READERS)), content=st.binary(max_size=300))
def test_any_bytes(tool: str, content: bytes) -> None:
    read(tool, content)


@st.composite
def near_valid(draw: st.DrawFn, tool: str) -> bytes:
    """Valid objects with some fields dropped or holding any JSON: what type checks must
    catch, and what they must let through."""
    base = READERS[tool][2]
    rows = []
    for number in range(draw(st.integers(1, 3))):
        row = {**base, "index": number} if "index" in base else dict(base)
        for key in draw(st.lists(st.sampled_from(sorted(base)), unique=True, max_size=3)):
            if draw(st.booleans()):
                del row[key]
            else:
                row[key] = draw(JSON)
        rows.append(row)
    if tool in ("counting_stars", "ruler"):
        return "\n".join(json.dumps(r) for r in rows).encode()
    return json.dumps(rows if draw(st.booleans()) else rows[0]).encode()


@settings(max_examples=300, deadline=None)
@given(data=st.data(), tool=st.sampled_from(sorted(READERS)))
def test_any_values_in_the_tool_s_fields(data: st.DataObject, tool: str) -> None:
    read(tool, data.draw(near_valid(tool)))
