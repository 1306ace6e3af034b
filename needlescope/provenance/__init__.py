"""Where an answer came from: stable hashes and canonical JSON, the serving fingerprint of a
local model (its GGUF, chat template, llama.cpp), and the prompts' hashes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.provenance._gguf import read_metadata
    from needlescope.provenance._hashing import canonical_json, short_hash
    from needlescope.provenance._prompt_hashes import template_sha256
    from needlescope.provenance.fingerprint import Fingerprint, served_by, serving_fingerprint

__all__ = [
    "Fingerprint",
    "canonical_json",
    "read_metadata",
    "served_by",
    "serving_fingerprint",
    "short_hash",
    "template_sha256",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "read_metadata": "._gguf",
        "canonical_json": "._hashing",
        "short_hash": "._hashing",
        "template_sha256": "._prompt_hashes",
        "Fingerprint": ".fingerprint",
        "served_by": ".fingerprint",
        "serving_fingerprint": ".fingerprint",
    },
)
