"""The serving fingerprint: what identifies the thing that answered, stored with every answer,
and what changed in it between two epochs of a model.

Fields: ``model_version``, ``system_fingerprint`` and ``service_tier`` (as the provider reports
them), ``sampling`` (the settings actually sent), ``prompt_version`` and ``template_sha256``,
and for the local model ``gguf_sha256``, ``chat_template_sha256`` and ``llama_cpp``. Every
field is a string or None, so each is one column of the answers table.

Design: docs/design/provenance.md#fingerprint
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from needlescope.provenance._gguf import chat_template

# Parts of a request body that carry the prompt (or the model asked for), not how to sample.
# What a body says of its prompt, not of its sampling (OpenAI's prompt_cache_key names a prefix).
PROMPT_KEYS = frozenset(
    {"messages", "contents", "system", "systemInstruction", "model", "prompt_cache_key"}
)
SHORT_HASH = 12
_SEPARATORS = "-._/:@ "


@dataclass(frozen=True)
class Fingerprint:
    model_version: str | None = None
    system_fingerprint: str | None = None
    service_tier: str | None = None
    sampling: str | None = None
    prompt_version: str | None = None
    template_sha256: str | None = None
    gguf_sha256: str | None = None
    chat_template_sha256: str | None = None
    llama_cpp: str | None = None

    def to_row(self) -> dict[str, str | None]:
        return asdict(self)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Fingerprint))


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sampling_sent(body: Mapping[str, Any]) -> str:
    """The settings of a request body (temperature, limits, seed, Gemini's generationConfig,
    Anthropic's thinking…) as canonical JSON: keys sorted, no spaces."""
    settings = {k: v for k, v in body.items() if k not in PROMPT_KEYS}
    return json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ServedBy:
    model_version: str | None
    system_fingerprint: str | None
    service_tier: str | None


def served_by(reply: Mapping[str, Any]) -> ServedBy:
    """Who served a reply, from its JSON body: OpenAI-compatible (``model``,
    ``system_fingerprint``, ``service_tier``; llama.cpp's server: the GGUF file's name and its
    build as the fingerprint), Anthropic (``model``, ``usage.service_tier``) or Gemini
    (``modelVersion``)."""
    usage = reply.get("usage")
    tier = reply.get("service_tier")
    if tier is None and isinstance(usage, Mapping):
        tier = usage.get("service_tier")
    return ServedBy(
        model_version=_text(reply.get("modelVersion")) or _model_name(reply.get("model")),
        system_fingerprint=_text(reply.get("system_fingerprint")),
        service_tier=_text(tier),
    )


def serving_fingerprint(reply: Any, body: Mapping[str, Any]) -> Fingerprint:
    """The fingerprint a provider knows of one reply: who served it and the sampling sent."""
    served = served_by(reply) if isinstance(reply, Mapping) else ServedBy(None, None, None)
    return Fingerprint(
        model_version=served.model_version,
        system_fingerprint=served.system_fingerprint,
        service_tier=served.service_tier,
        sampling=sampling_sent(body),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _model_name(value: Any) -> str | None:
    """llama.cpp's server names its model by the file's path, which differs from machine to
    machine: the file's name says which model it is."""
    name = _text(value)
    if name is not None and name.lower().endswith(".gguf"):
        return name.replace("\\", "/").rsplit("/", 1)[-1]
    return name


def llama_cpp_version() -> str | None:
    """The llama.cpp the local model runs on: xllamacpp's version (its wheels pin one
    llama.cpp build), and the build itself when the wheel records it."""
    try:
        import xllamacpp
    except ImportError:
        return None
    version = f"xllamacpp {xllamacpp.__version__}"
    build = getattr(xllamacpp, "BUILD_INFO", None)
    if isinstance(build, Mapping):
        number, commit = build.get("build_number"), build.get("commit")
        if number or (commit and commit != "unknown"):
            version += f" (llama.cpp b{number} {commit})"
    return version


@dataclass(frozen=True)
class LocalServing:
    gguf_sha256: str
    chat_template_sha256: str | None
    llama_cpp: str | None


def local_serving(model_path: str | os.PathLike[str], gguf_sha256: str) -> LocalServing:
    """The local model's part of the fingerprint; ``gguf_sha256`` is the file's hash, which
    the caller caches (``warehouse/store/file_hashes.py``), as it takes seconds per gigabyte."""
    template = chat_template(model_path)
    return LocalServing(
        gguf_sha256=gguf_sha256,
        chat_template_sha256=text_sha256(template) if template is not None else None,
        llama_cpp=llama_cpp_version(),
    )


# ----------------------------------------------------------------------------- what changed


@dataclass(frozen=True)
class Summary:
    """A model's fingerprints over one epoch: each field's distinct values; ``sampling`` per
    setting (``generationConfig.temperature``: its values as JSON); template hashes per
    prompt version (one answer's hash is its own version's)."""

    values: Mapping[str, frozenset[str]] = field(default_factory=dict)
    sampling: Mapping[str, frozenset[str]] = field(default_factory=dict)
    templates: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (any(self.values.values()) or self.sampling or self.templates)


_PLAIN = ("model_version", "system_fingerprint", "service_tier")
_HASHES = ("gguf_sha256", "chat_template_sha256")
_ENGINE = ("llama_cpp",)
_NAMES = {
    "model_version": "model version",
    "system_fingerprint": "system fingerprint",
    "service_tier": "service tier",
    "gguf_sha256": "GGUF file hash",
    "chat_template_sha256": "chat template hash",
    "llama_cpp": "llama.cpp version",
}


def summarise(rows: Iterable[Mapping[str, Any]]) -> Summary:
    """The :class:`Summary` of answers' fingerprints (``Fingerprint``\\s or rows holding
    :data:`COLUMNS`; missing or null fields are skipped)."""
    values: dict[str, set[str]] = {name: set() for name in (*_PLAIN, *_HASHES, *_ENGINE)}
    sampling: dict[str, set[str]] = {}
    templates: dict[str, set[str]] = {}
    for row in rows:
        get = row.get
        for name in values:
            if isinstance(value := get(name), str):
                values[name].add(value)
        if isinstance(sent := get("sampling"), str):
            for key, setting in _flatten(json.loads(sent)).items():
                sampling.setdefault(key, set()).add(setting)
        version, digest = get("prompt_version"), get("template_sha256")
        if isinstance(version, str) and isinstance(digest, str):
            templates.setdefault(version, set()).add(digest)
    return Summary(
        {k: frozenset(v) for k, v in values.items()},
        {k: frozenset(v) for k, v in sampling.items()},
        {k: frozenset(v) for k, v in templates.items()},
    )


def summaries(rows: Iterable[Mapping[str, Any]]) -> dict[str, Summary]:
    """One :class:`Summary` per ``model`` of the rows."""
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_model.setdefault(str(row["model"]), []).append(row)
    return {model: summarise(group) for model, group in sorted(by_model.items())}


def _flatten(settings: Any, prefix: str = "") -> dict[str, str]:
    if not isinstance(settings, Mapping) or not settings:
        return {prefix: json.dumps(settings, sort_keys=True)} if prefix else {}
    flat: dict[str, str] = {}
    for key, value in settings.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def what_changed(before: Summary, after: Summary) -> list[str]:
    """Lines saying what changed from ``before`` to ``after`` (an earlier and a later epoch
    of one model): "model version gemini-2.5-flash-001 → -002", "chat template hash changed
    (…)". Nothing is compared when ``before`` recorded no fingerprint at all."""
    if before.empty:
        return [] if after.empty else ["no serving fingerprint recorded in the previous epoch"]
    lines: list[str] = []
    for name in _PLAIN + _ENGINE:
        lines += _change(_NAMES[name], before.values.get(name), after.values.get(name), _shown)
    for name in _HASHES:
        old, new = before.values.get(name), after.values.get(name)
        if old and new and old != new:
            lines.append(f"{_NAMES[name]} changed ({_hashes(old)} → {_hashes(new)})")
        else:
            lines += _change(_NAMES[name], old, new, _hashes)
    for key in sorted(before.sampling.keys() | after.sampling.keys()):
        old_s, new_s = before.sampling.get(key), after.sampling.get(key)
        lines += _change(f"sampling {key}", old_s, new_s, _settings, "sent")
    for version in sorted(before.templates.keys() & after.templates.keys()):
        old_t, new_t = before.templates[version], after.templates[version]
        if old_t != new_t:
            lines.append(
                f"prompt template {version} text changed ({_hashes(old_t)} → {_hashes(new_t)})"
            )
    return lines


def changes_by_model(
    before: Mapping[str, Summary], after: Mapping[str, Summary]
) -> dict[str, list[str]]:
    """:func:`what_changed` for each model of ``after`` that ``before`` has too."""
    return {m: what_changed(before[m], summary) for m, summary in after.items() if m in before}


def _change(
    name: str,
    old: frozenset[str] | None,
    new: frozenset[str] | None,
    show: Callable[[frozenset[str]], str],
    verb: str = "reported",
) -> list[str]:
    old, new = old or frozenset(), new or frozenset()
    if old == new:
        return []
    if not new:
        return [f"{name} no longer {verb} (was {show(old)})"]
    if not old:
        return [f"{name} now {verb}: {show(new)}"]
    if len(old) == len(new) == 1 and show is _shown:
        return [f"{name} {_arrow(next(iter(old)), next(iter(new)))}"]
    return [f"{name} {show(old)} → {show(new)}"]


def _shown(values: frozenset[str]) -> str:
    return ", ".join(sorted(values))


def _hashes(values: frozenset[str]) -> str:
    return ", ".join(sorted(v[:SHORT_HASH] for v in values))


def _settings(values: frozenset[str]) -> str:
    shown = [json.loads(v) for v in values]
    return ", ".join(sorted(v if isinstance(v, str) else json.dumps(v) for v in shown))


def _arrow(old: str, new: str) -> str:
    """``old → new``; when only the last part changed, new shows that part alone:
    "gemini-2.5-flash-001 → -002"."""
    cut = _last_separator(old)
    if cut > 0 and new[: cut + 1] == old[: cut + 1] and _last_separator(new) == cut:
        return f"{old} → {new[cut:]}"
    return f"{old} → {new}"


def _last_separator(text: str) -> int:
    return max(text.rfind(c) for c in _SEPARATORS)
