"""The models of a sweep config: each model's provider, endpoint, generation settings, limits
and price (part of config.py's models; ``needlescope.config._sweep`` is the front door)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    field_serializer,
    field_validator,
    model_validator,
)

if TYPE_CHECKING:
    from needlescope.providers.base import ChatRequest, Message
from needlescope.providers import (
    DEFAULT_REASONING_BUDGET,
    DEFAULT_TEMPERATURE,
    check_generation,
    reasoning_allowance,
    thinks_by_default,
    uses_openai_reasoning_params,
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"
PROVIDER_KINDS = ("local", "openai", "anthropic", "gemini")
# Providers whose token counts are requests to a hosted, rate-limited counting endpoint.
HOSTED_COUNTERS = ("anthropic", "gemini")
# Where a remote provider answers when the config gives no base_url.
DEFAULT_BASE_URLS = {
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


def check_url(value: str) -> None:
    """An http(s) URL with a host and a valid port, or a ValueError saying what is wrong."""
    try:
        url = urlsplit(value)
        port = url.port
    except ValueError as exc:  # "Port out of range 0-65535", "Port could not be cast…"
        raise ValueError(f"not a usable URL {without_credentials(value)!r}: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise ValueError(
            f"{without_credentials(value)!r}: the URL must start with http:// or https://"
        )
    if not url.hostname:
        raise ValueError(f"{without_credentials(value)!r}: the URL names no host")
    if port == 0:
        raise ValueError(f"{without_credentials(value)!r}: port 0 is not a port to connect to")


def has_credentials(url: str) -> bool:
    parts = urlsplit(url)
    return parts.username is not None or parts.password is not None


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` taken out (for storing and showing it)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


LengthUnit = Literal["tokens", "bytes", "chars"]
# Grid axes of sizes take whole numbers only: `true` or `1.5` in YAML is a mistake, not 1.
Count = Annotated[int, Field(gt=0, le=100_000_000, strict=True)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Generation(Frozen):
    """Settings sent with every request. Part of the cell id: changing one asks the model again."""

    # None or "omit": not sent (the recall seed sends neither temperature nor max_tokens).
    temperature: float | None = Field(default=DEFAULT_TEMPERATURE, ge=0, le=2)
    # None: sized to the probe's answer; "omit": not sent at all.
    max_tokens: PositiveInt | Literal["omit"] | None = None
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("temperature", mode="before")
    @classmethod
    def _omitted_temperature(cls, value: Any) -> Any:
        return None if value == "omit" else value

    @property
    def answer_tokens(self) -> int | None:
        """The configured answer budget, or None to size it to the probe's answer."""
        return self.max_tokens if isinstance(self.max_tokens, int) else None

    @property
    def sends_max_tokens(self) -> bool:
        return self.max_tokens != "omit"

    def request(self, messages: tuple[Message, ...], answer_tokens: int) -> ChatRequest:
        """The request these settings send for ``messages`` with an answer budget."""
        from needlescope.providers.base import ChatRequest

        extra = {k: v for k, v in {"top_p": self.top_p, "seed": self.seed}.items() if v is not None}
        return ChatRequest(
            messages=messages,
            max_tokens=answer_tokens if self.sends_max_tokens else None,
            temperature=self.temperature,
            extra={**extra, **self.extra},
        )


class Price(Frozen):
    """US dollars per million tokens. Output tokens include reasoning (billed as output)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    # Prompt tokens read from the provider's cache; None: priced as any input token.
    cached_input_per_mtok: float | None = Field(default=None, ge=0)

    def cost(
        self,
        prompt_tokens: int | None,
        output_tokens: int | None,
        cached_tokens: int | None = None,
    ) -> float | None:
        if prompt_tokens is None and output_tokens is None:
            return None
        cached = min(cached_tokens or 0, prompt_tokens or 0)
        cached_rate = self.input_per_mtok
        if self.cached_input_per_mtok is not None:
            cached_rate = self.cached_input_per_mtok
        return (
            ((prompt_tokens or 0) - cached) * self.input_per_mtok
            + cached * cached_rate
            + (output_tokens or 0) * self.output_per_mtok
        ) / 1e6


class ModelConfig(Frozen):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    provider: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    # The name of a Prefect Secret block holding the key: where scheduled deployments keep it.
    api_key_secret: Annotated[str, Field(min_length=1)] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    context_window: PositiveInt | None = None
    concurrency: PositiveInt = 4
    delay_s: float = Field(default=0.0, ge=0)  # seconds between two requests' starts (pacing)
    timeout_s: float = Field(default=600, gt=0)
    max_retry_after_s: float = Field(default=60, ge=0)
    threads: PositiveInt | None = None
    under_test: bool = True  # false for a model that only judges or embeds
    generation: Generation = Field(default_factory=Generation)
    # Generation settings as a grid axis: each entry becomes a model "<name>@<label>" whose
    # generation is this one's with the entry's fields (and `extra` keys) laid over it.
    variants: dict[Annotated[str, Field(pattern=NAME_PATTERN)], dict[str, Any]] = Field(
        default_factory=dict
    )
    price: Price | None = None
    # A model that thinks gets answer budget + reasoning_budget as its output limit. None: by
    # its name (o1/o3/o4/gpt-5, deepseek-reasoner, Gemini 2.5 and later); a model whose
    # replies carry reasoning is treated as one from then on. Not part of a cell's id.
    reasoning: bool | None = None
    reasoning_budget: PositiveInt = DEFAULT_REASONING_BUDGET
    # OpenAI's reasoning-model parameters: max_completion_tokens, no temperature or top_p.
    # None: true for OpenAI-compatible model ids starting o1, o3, o4 or gpt-5.
    openai_reasoning_params: bool | None = None
    # The cells table's haystack_length of token cells. None: counted unless that is a request
    # of its own to a hosted counter (HOSTED_COUNTERS), where it would send nearly the whole
    # prompt again for every cell; true: always counted; false: never. Not part of a cell's id.
    count_haystack: bool | None = None

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in PROVIDER_KINDS:
            raise ValueError(f"unknown provider {value!r}; known: {', '.join(PROVIDER_KINDS)}")
        return value

    @field_validator("base_url")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        if value is not None:
            check_url(value)
        return value

    @field_serializer("base_url")
    def _no_credentials(self, value: str | None) -> str | None:
        # Credentials in a URL are secrets like keys: a stored or printed config never has them.
        return None if value is None else without_credentials(value)

    @model_validator(mode="after")
    def _remote_needs_url(self) -> ModelConfig:
        if self.provider == "openai" and not self.base_url:
            raise ValueError("an openai model needs base_url (e.g. https://api.openai.com/v1)")
        if self.provider != "local" and not self.model:
            raise ValueError(f"an {self.provider} model needs model (the id the API expects)")
        if self.api_key_env and self.api_key_secret:
            raise ValueError("give api_key_env or api_key_secret, not both")
        if self.base_url and has_credentials(self.base_url):
            key = next((k for k in ("api_key_env", "api_key_secret") if getattr(self, k)), None)
            if key is None and any(h.lower() == "authorization" for h in self.headers):
                key = "an Authorization header"
            if key is not None:
                raise ValueError(
                    f"base_url: credentials in the URL (sent as HTTP Basic auth) and {key}"
                    " together: give one of them"
                )
        return self

    @model_validator(mode="after")
    def _provider_accepts_generation(self) -> ModelConfig:
        check_generation(
            self.provider,
            self.model,
            self.generation,
            reasoning_params=self.sends_reasoning_params,
        )
        return self

    @property
    def thinks(self) -> bool:
        """Whether the model reasons before answering (configured, else by its name)."""
        if self.reasoning is not None:
            return self.reasoning
        return thinks_by_default(self.provider, self.model)

    @property
    def counts_haystack(self) -> bool:
        """Whether a token cell's haystack is counted for the cells table (``count_haystack``)."""
        if self.count_haystack is not None:
            return self.count_haystack
        return self.provider not in HOSTED_COUNTERS

    @property
    def sends_reasoning_params(self) -> bool:
        """OpenAI-compatible: send max_completion_tokens and no temperature / top_p."""
        if self.provider != "openai":
            return False
        if self.openai_reasoning_params is not None:
            return self.openai_reasoning_params
        return uses_openai_reasoning_params(self.model)

    def output_limit(self, answer_tokens: int) -> int:
        """The output limit sent for an answer budget: room for reasoning added."""
        return answer_tokens + reasoning_allowance(
            self.provider,
            self.generation.extra,
            reasoning=self.thinks,
            reasoning_budget=self.reasoning_budget,
        )

    def endpoint(self) -> str:
        """The URL the provider talks to (configured, or the provider's public API)."""
        return self.base_url or DEFAULT_BASE_URLS.get(self.provider, "")

    def identity(self) -> dict[str, Any]:
        """What identifies the model in a cell id: never keys, URLs or concurrency."""
        return {"name": self.name, "provider": self.provider, "model": self.model}
