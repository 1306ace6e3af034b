"""The local model's part of the fingerprint: GGUF metadata read from the header (the real
bundled SmolLM2 file, and small files written here byte by byte), its chat template's hash,
and the file's SHA-256 hashed once and cached by path, size and modification time."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from needlescope.provenance import fingerprint as fp
from needlescope.provenance._gguf import CHAT_TEMPLATE, GGUFError, chat_template, read_metadata
from needlescope.providers.local import default_gguf_path
from needlescope.warehouse.store import file_hashes
from needlescope.warehouse.store.file_hashes import sha256_cached

SMOL = default_gguf_path()


# ----------------------------------------------------------------------------- a GGUF writer


def _string(text: str, order: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(order + "Q", len(data)) + data


def _value(value: Any, order: str) -> tuple[int, bytes]:
    """(GGUF value type, encoded value) for a str, bool, int (uint32), float (float64) or
    list of one of those."""
    if isinstance(value, str):
        return 8, _string(value, order)
    if isinstance(value, bool):
        return 7, struct.pack(order + "?", value)
    if isinstance(value, int):
        return 4, struct.pack(order + "I", value)
    if isinstance(value, float):
        return 12, struct.pack(order + "d", value)
    kinds, parts = zip(*(_value(v, order) for v in value), strict=True) if value else ((4,), ())
    return 9, struct.pack(order + "IQ", kinds[0], len(value)) + b"".join(parts)


def write_gguf(path: Path, metadata: dict[str, Any], *, order: str = "<", version: int = 3) -> Path:
    body = b""
    for key, value in metadata.items():
        kind, data = _value(value, order)
        body += _string(key, order) + struct.pack(order + "I", kind) + data
    header = b"GGUF" + struct.pack(order + "IQQ", version, 0, len(metadata))
    path.write_bytes(header + body + b"\0" * 64)  # tensor data would follow
    return path


TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"


# ----------------------------------------------------------------------------- the reader


def test_the_bundled_models_metadata_and_chat_template() -> None:
    wanted = read_metadata(SMOL, ("general.architecture", "llama.context_length", CHAT_TEMPLATE))
    assert wanted["general.architecture"] == "llama"
    assert wanted["llama.context_length"] == 8192  # SmolLM2 was trained to 8192 tokens
    template = chat_template(SMOL)
    assert template == wanted[CHAT_TEMPLATE]
    assert template.startswith("{% for message in messages %}")
    assert "<|im_start|>" in template and "add_generation_prompt" in template
    everything = read_metadata(SMOL)
    assert len(everything["tokenizer.ggml.tokens"]) == 49152 == everything["llama.vocab_size"]
    assert everything["tokenizer.ggml.tokens"][:3] == [
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
    ]


@pytest.mark.parametrize("order", ["<", ">"])
def test_written_files_read_back_exactly(tmp_path: Path, order: str) -> None:
    metadata = {
        "general.architecture": "llama",
        "general.name": "tiny – ünïcode",
        "llama.context_length": 4096,
        "general.flag": True,
        "llama.rope.freq_base": 10000.5,
        "tokenizer.ggml.tokens": ["<s>", "</s>", "a", "b"],
        "tokenizer.ggml.scores": [0, 1, 2],
        "nested": [["x", "y"], ["z"]],
        "empty": [],
        CHAT_TEMPLATE: TEMPLATE,
        "general.quantization_version": 2,
    }
    path = write_gguf(tmp_path / "tiny.gguf", metadata, order=order)
    assert read_metadata(path) == metadata
    assert chat_template(path) == TEMPLATE
    # Keys asked for only: the others skipped, reading stopped at the last one found.
    assert read_metadata(path, ["llama.context_length", "nested"]) == {
        "llama.context_length": 4096,
        "nested": [["x", "y"], ["z"]],
    }
    assert chat_template(write_gguf(tmp_path / "bare.gguf", {"a": 1}, order=order)) is None


def test_files_that_are_no_gguf_are_refused_in_one_line(tmp_path: Path) -> None:
    cases = {
        "text.gguf": (b"hello, world", "not a GGUF model file"),
        "v1.gguf": (None, "GGUF version 1 is not supported (2 and 3 are)"),
        "short.gguf": (b"GGUF\x03\x00\x00\x00\x00", "the GGUF header ends early"),
        "long.gguf": (
            b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 10**9),
            "a GGUF length (1000000000) runs past the end of the file",
        ),
    }
    for name, (data, expected) in cases.items():
        path = tmp_path / name
        if data is None:
            write_gguf(path, {"a": 1}, version=1)
        else:
            path.write_bytes(data)
        with pytest.raises(GGUFError) as caught:
            read_metadata(path)
        assert str(caught.value) == f"{path}: {expected}"


# ----------------------------------------------------------------------------- local serving


def test_the_chat_template_hash_is_the_templates_own_and_stable(tmp_path: Path) -> None:
    first = fp.local_serving(SMOL, "f" * 64)
    again = fp.local_serving(SMOL, "f" * 64)
    assert first == again
    template = chat_template(SMOL)
    assert template is not None
    assert first.chat_template_sha256 == hashlib.sha256(template.encode()).hexdigest()
    assert first.gguf_sha256 == "f" * 64
    version = importlib.metadata.version("xllamacpp")
    assert first.llama_cpp is not None and first.llama_cpp.startswith(f"xllamacpp {version}")
    assert (
        fp.local_serving(write_gguf(tmp_path / "x.gguf", {"a": 1}), "0" * 64).chat_template_sha256
        is None
    )


def test_a_changed_chat_template_is_listed_as_a_change(tmp_path: Path) -> None:
    cache = tmp_path / "hashes.json"
    rows = []
    for night, template in (("e1", TEMPLATE), ("e2", TEMPLATE + "\n")):
        path = write_gguf(
            tmp_path / f"{night}.gguf", {"general.name": "tiny", CHAT_TEMPLATE: template}
        )
        local = fp.local_serving(path, sha256_cached(path, cache).sha256)
        rows.append(
            fp.Fingerprint(
                model_version="tiny.gguf",
                gguf_sha256=local.gguf_sha256,
                chat_template_sha256=local.chat_template_sha256,
                llama_cpp=local.llama_cpp,
            )
        )
    before, after = (fp.summarise([asdict_row(r)]) for r in rows)
    lines = fp.what_changed(before, after)
    assert [line.split(" (")[0] for line in lines] == [
        "GGUF file hash changed",
        "chat template hash changed",
    ]
    old, new = rows[0].chat_template_sha256, rows[1].chat_template_sha256
    assert old and new and lines[1] == f"chat template hash changed ({old[:12]} → {new[:12]})"


def asdict_row(fingerprint: fp.Fingerprint) -> dict[str, str | None]:
    return {"model": "local", **fingerprint.to_row()}


# ----------------------------------------------------------------------------- the cached hash


def test_the_bundled_model_is_hashed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache" / "gguf-sha256.json"
    first = sha256_cached(SMOL, cache)
    with SMOL.open("rb") as handle:
        assert first.sha256 == hashlib.file_digest(handle, "sha256").hexdigest()
    assert not first.cached
    stat = SMOL.stat()
    assert json.loads(cache.read_text()) == {
        str(SMOL.resolve()): {
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "sha256": first.sha256,
        }
    }

    def no_reading(path: object) -> str:
        raise AssertionError(f"{path} was read again")

    monkeypatch.setattr(file_hashes, "sha256_file", no_reading)
    second = sha256_cached(SMOL, cache)
    assert second.cached and second.sha256 == first.sha256


def test_a_changed_file_is_hashed_again(tmp_path: Path) -> None:
    cache = tmp_path / "hashes.json"
    path = tmp_path / "model.gguf"
    path.write_bytes(b"one")
    assert sha256_cached(path, cache) == file_hashes.FileHash(
        hashlib.sha256(b"one").hexdigest(), False
    )
    assert sha256_cached(path, cache).cached
    # Same size, new modification time: read again.
    path.write_bytes(b"two")
    os.utime(path, ns=(0, path.stat().st_mtime_ns + 10**9))
    changed = sha256_cached(path, cache)
    assert changed == file_hashes.FileHash(hashlib.sha256(b"two").hexdigest(), False)
    # Same modification time, new size: read again.
    mtime = path.stat().st_mtime_ns
    path.write_bytes(b"three")
    os.utime(path, ns=(0, mtime))
    assert sha256_cached(path, cache) == file_hashes.FileHash(
        hashlib.sha256(b"three").hexdigest(), False
    )
    # A cache that is not JSON (or holds a bad hash) is started afresh.
    for broken in (
        "{not json",
        json.dumps({str(path.resolve()): {"size": 5, "mtime_ns": mtime, "sha256": "x"}}),
    ):
        cache.write_text(broken)
        assert not sha256_cached(path, cache).cached
        assert sha256_cached(path, cache).cached
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []
