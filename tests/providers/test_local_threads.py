"""The local model's llama.cpp threads: the config's `threads`, else $NEEDLESCOPE_LOCAL_THREADS,
else one per core; a bad value is refused in one line naming the variable."""

from __future__ import annotations

import os

import pytest

from needlescope.errors import ConfigError
from needlescope.providers.local import THREADS_ENV, LocalServer, default_threads


def test_one_thread_per_core_unless_the_environment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert default_threads() == (os.cpu_count() or 1)
    monkeypatch.setenv(THREADS_ENV, " 3 ")
    assert default_threads() == 3
    assert LocalServer("model.gguf").n_threads == 3
    assert LocalServer("model.gguf", n_threads=5).n_threads == 5  # the config's own wins


@pytest.mark.parametrize("raw", ["0", "-1", "two", "1.5", "²"])
def test_a_bad_thread_count_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv(THREADS_ENV, raw)
    with pytest.raises(ConfigError) as caught:
        LocalServer("model.gguf")
    message = str(caught.value)
    assert THREADS_ENV in message and repr(raw) in message and "\n" not in message
