"""The exception types a user reads, one hierarchy under NeedlescopeError. Each message is one
line naming what is wrong."""


class NeedlescopeError(Exception):
    """Base class: anything the CLI reports as a one-line error with exit code 2."""


class ConfigError(NeedlescopeError):
    """A config file that does not validate; the message names the field."""


class WarehouseError(NeedlescopeError):
    """A warehouse that cannot be read or written."""


class ProviderError(NeedlescopeError):
    """A model request that failed; ``kind`` is a stable, queryable error category."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s

    def __reduce__(self):  # keeps kind/retryable through pickling (Prefect persists exceptions)
        return (
            _rebuild_provider_error,
            (self.kind, str(self), self.retryable, self.status, self.retry_after_s),
        )


def _rebuild_provider_error(
    kind: str, message: str, retryable: bool, status: int | None, retry_after_s: float | None
) -> ProviderError:
    return ProviderError(
        kind, message, retryable=retryable, status=status, retry_after_s=retry_after_s
    )


class LengthError(NeedlescopeError, ValueError):
    """A cell's target length cannot be met (its instructions alone are longer)."""


class RuleError(ConfigError, ValueError):
    """A generation setting the provider's API refuses; the message starts with its field."""


class MissingFacts(WarehouseError, ValueError):
    """A stored cell's facts lack what rebuilding its prompt needs (rag: the retrieval order)."""


class GGUFError(NeedlescopeError, ValueError):
    """A file that is not a GGUF model this reader understands."""
