"""Providers by kind: ``@register("openai")`` a factory; ``create_provider("openai", **kw)``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

from needlescope.errors import ConfigError
from needlescope.providers.base import Provider

F = TypeVar("F", bound=Callable[..., Any])

# Built-in kinds live in modules imported on first use, so an unused provider costs nothing.
_BUILTIN = {
    "openai": "needlescope.providers.openai",
    "local": "needlescope.providers.local",
    "anthropic": "needlescope.providers.anthropic",
    "gemini": "needlescope.providers.gemini",
}
_FACTORIES: dict[str, Callable[..., Provider]] = {}
# Kinds whose servers reuse the computed prefix of an earlier prompt: llama.cpp's prompt cache,
# OpenAI's and Gemini's automatic prompt caching. Anthropic caches only marked blocks.
CACHES_PREFIXES = frozenset({"local", "openai", "gemini"})


def register(kind: str) -> Callable[[F], F]:
    """Register a provider class (or any factory returning a Provider) under ``kind``."""

    def decorator(factory: F) -> F:
        _FACTORIES[kind] = factory
        return factory

    return decorator


def known_kinds() -> list[str]:
    return sorted(set(_BUILTIN) | set(_FACTORIES))


def get_factory(kind: str) -> Callable[..., Provider]:
    if kind not in _FACTORIES and kind in _BUILTIN:
        importlib.import_module(_BUILTIN[kind])
    try:
        return _FACTORIES[kind]
    except KeyError:
        raise ConfigError(
            f"unknown provider kind {kind!r}; known kinds: {', '.join(known_kinds())}"
        ) from None


def create_provider(kind: str, **kwargs: Any) -> Provider:
    return get_factory(kind)(**kwargs)
