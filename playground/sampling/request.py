"""What a person asks for, and the server-side checks it must pass before it reaches an engine.

The UI's sliders have bounds, but an API client (or a crafted request) does not go through them,
so every field is coerced and checked here, on the server, and each failure names the field, the
value and the allowed range. Nothing here imports vLLM: the remote backend and the analysis share
these rules, and the checks run before any engine is touched.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from playground.errors import InvalidRequest
from playground.sampling.plan import check_mode, check_seed

OUTPUT_KINDS = ("CUMULATIVE", "DELTA", "FINAL_ONLY")
GREEDY_EPS = 1e-5  # vLLM treats temperature below this as greedy


@dataclass(frozen=True)
class Limits:
    """Server-side limits; the engine supplies the context length and the logprobs cap."""

    max_n: int = 32
    max_model_len: int = 2048
    max_logprobs: int = 20
    max_stop_strings: int = 8
    max_stop_chars: int = 200
    max_prompt_chars: int = 100_000

    @classmethod
    def before_engine(cls, max_n: int) -> Limits:
        """The limits a command line can check before an engine starts: the engine's own context
        length and logprobs cap are not known yet, so they are left open here and checked at
        submission, and a typo costs no engine start."""
        return cls(max_n=max_n, max_model_len=2**31, max_logprobs=2**31)


@dataclass
class SampleRequest:
    """One parent request: a prompt, how many samples, and every sampler setting."""

    prompt: str
    n: int = 4
    seed: int | None = None
    output_kind: str = "CUMULATIVE"
    mode: str = "wrapper"
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    max_tokens: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    stop: list[str] = field(default_factory=list)
    logprobs: int | None = None
    use_chat_template: bool = False
    ignore_eos: bool = False

    @classmethod
    def from_user(cls, **raw: Any) -> SampleRequest:
        """Coerce loosely typed input (UI numbers arrive as floats, seeds as text) and check it."""
        unknown = set(raw) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InvalidRequest(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values = {k: v for k, v in raw.items() if v is not None or k in ("seed", "logprobs")}
        request = cls(prompt=_prompt(values.pop("prompt", None)))
        for name, value in values.items():
            setattr(request, name, _COERCE[name](name, value))
        return request

    def check(self, limits: Limits) -> None:
        """Every check that needs no tokenizer. Raises InvalidRequest naming the first problem."""
        _check_prompt_text(self.prompt, limits)
        check_n(self.n, limits.max_n)
        if self.output_kind not in OUTPUT_KINDS:
            raise InvalidRequest(f"output_kind must be one of {', '.join(OUTPUT_KINDS)}, got {self.output_kind!r}")
        check_mode(self.mode)
        check_seed(self.seed, self.n)
        if self.temperature < 0:
            raise InvalidRequest(f"temperature must be 0 or more, got {self.temperature}")
        check_greedy(self.temperature, self.n)
        if not 0 < self.top_p <= 1:
            raise InvalidRequest(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < -1:
            raise InvalidRequest(f"top_k must be -1 or 0 (off) or a positive count, got {self.top_k}")
        if not 0 <= self.min_p <= 1:
            raise InvalidRequest(f"min_p must be in [0, 1], got {self.min_p}")
        for name in ("presence_penalty", "frequency_penalty"):
            if not -2 <= getattr(self, name) <= 2:
                raise InvalidRequest(f"{name} must be in [-2, 2], got {getattr(self, name)}")
        if not 0 < self.repetition_penalty <= 2:
            raise InvalidRequest(f"repetition_penalty must be in (0, 2], got {self.repetition_penalty}")
        if self.max_tokens <= 0:
            raise InvalidRequest(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.max_tokens >= limits.max_model_len:
            raise InvalidRequest(
                f"max_tokens={self.max_tokens} does not fit the context of {limits.max_model_len} tokens"
            )
        if len(self.stop) > limits.max_stop_strings:
            raise InvalidRequest(f"at most {limits.max_stop_strings} stop strings are allowed, got {len(self.stop)}")
        for i, stop in enumerate(self.stop, 1):
            if stop == "":
                raise InvalidRequest(f"stop string #{i} is empty; an empty stop string would end every sample at once")
            if len(stop) > limits.max_stop_chars:
                raise InvalidRequest(f"stop string #{i} is longer than {limits.max_stop_chars} characters")
            _check_text(stop, f"stop string #{i}")
        if self.logprobs is not None and not 0 <= self.logprobs <= limits.max_logprobs:
            raise InvalidRequest(
                f"logprobs must be between 0 and the engine's limit of {limits.max_logprobs}, got {self.logprobs}"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_n(n: int, max_n: int) -> None:
    if not 1 <= n <= max_n:
        raise InvalidRequest(f"n must be between 1 and {max_n} (--max-n), got {n}")


def check_greedy(temperature: float, n: int) -> None:
    if temperature < GREEDY_EPS and n > 1:
        raise InvalidRequest(
            f"greedy sampling (temperature 0) with n={n} would give {n} identical samples, and vLLM "
            "rejects it: raise the temperature or set n=1"
        )


def check_context(prompt_tokens: int, max_tokens: int, max_model_len: int) -> None:
    """The prompt and every sample's tokens must fit the model's context."""
    if prompt_tokens == 0:
        raise InvalidRequest("the prompt is empty after tokenization")
    if prompt_tokens >= max_model_len:
        raise InvalidRequest(
            f"the prompt has {prompt_tokens} tokens, longer than the context of {max_model_len} tokens"
        )
    if prompt_tokens + max_tokens > max_model_len:
        raise InvalidRequest(
            f"max_tokens={max_tokens} is too big: the prompt has {prompt_tokens} tokens and the context "
            f"is {max_model_len}, so at most {max_model_len - prompt_tokens} tokens fit"
        )


def _check_prompt_text(prompt: str, limits: Limits) -> None:
    if not prompt.strip():
        raise InvalidRequest("the prompt is empty: type some text to sample from")
    if len(prompt) > limits.max_prompt_chars:
        raise InvalidRequest(f"the prompt has {len(prompt)} characters, "
                             f"more than the limit of {limits.max_prompt_chars}")
    _check_text(prompt, "the prompt")


def _check_text(text: str, what: str) -> None:
    if "\x00" in text:
        raise InvalidRequest(f"{what} contains a NUL character (\\x00), which is not text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidRequest(f"{what} is not valid UTF-8 (a lone surrogate at position {e.start})") from None


def _prompt(value: Any) -> str:
    if value is None:
        raise InvalidRequest("the prompt is missing")
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidRequest(f"the prompt is not valid UTF-8 (bad byte at position {e.start})") from None
    if not isinstance(value, str):
        raise InvalidRequest(f"the prompt must be text, got {type(value).__name__}")
    return value


def _int(name: str, value: Any) -> int:
    """Whole numbers stay exact: text is parsed as a decimal, never through a float (which would
    turn the seed 9007199254740993 into ...992 without a word). A float is accepted only when it
    holds a whole number exactly (UI number boxes send 4.0 for 4)."""
    if isinstance(value, bool):
        raise InvalidRequest(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, str):
        try:
            number = Decimal(value.strip().replace("_", ""))
        except InvalidOperation:
            raise InvalidRequest(f"{name} must be a whole number, got {value!r}") from None
        if number.is_finite() and number.adjusted() >= 40:  # int() of 1e999999999 would not end
            raise InvalidRequest(f"{name} must be a whole number of at most 40 digits, got {value!r}")
        if number.is_finite() and number == number.to_integral_value():
            return int(number)
        raise InvalidRequest(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    raise InvalidRequest(f"{name} must be a whole number, got {value!r}")


def _optional_int(name: str, value: Any) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _int(name, value)


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise InvalidRequest(f"{name} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise InvalidRequest(f"{name} must be a finite number, got {value!r}")
    return number


def _choice(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be text, got {value!r}")
    value = value.strip()
    return value.upper() if name == "output_kind" else value.lower()


def _stop(name: str, value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
        return list(value)
    raise InvalidRequest(f"stop must be a string or a list of strings, got {value!r}")


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise InvalidRequest(f"{name} must be true or false, got {value!r}")


_COERCE = {
    "n": _int,
    "seed": _optional_int,
    "output_kind": _choice,
    "mode": _choice,
    "temperature": _float,
    "top_p": _float,
    "top_k": _int,
    "min_p": _float,
    "max_tokens": _int,
    "presence_penalty": _float,
    "frequency_penalty": _float,
    "repetition_penalty": _float,
    "stop": _stop,
    "logprobs": _optional_int,
    "use_chat_template": _bool,
    "ignore_eos": _bool,
}
