"""What a person asks for: the one schema of a parallel request's settings, and the checks every
request passes on the server before it reaches an engine.

``SampleRequest``'s fields are the schema: each has its type and default, and its ``Setting``
(bounds, help, what it is to vLLM). Everything that names settings is derived from it: the coercion
and checks here, the page's form, ``/sample``'s signature, the command lines' flags, vLLM's
SamplingParams, the remote server's request body, and the lists of settings that compare,
reproduce, report and sweep runs. A new setting is one more field here.

The page's sliders have bounds, but an API client (or a crafted request) does not go through
them, so every field is coerced and checked here, and each failure names the field, the value and
the allowed range. Nothing here imports vLLM: the remote backend and the analysis read it too.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from playground.coerce import BY_TYPE, prompt_text
from playground.errors import InvalidRequest

OUTPUT_KINDS = ("CUMULATIVE", "DELTA", "FINAL_ONLY")
MODES = ("wrapper", "native", "same-seed")
GREEDY_EPS = 1e-5  # vLLM treats temperature below this as greedy
MAX_SEED = 2**63 - 1  # vLLM's seeds are 64-bit signed
# vLLM keeps top_k as int32 and reads any k past the vocabulary as off; a k past 64 bits cannot
# even be sent to its engine core
TOP_K_MOST = 2**31 - 1
# The most samples of one request, unless --max-n says otherwise: self-consistency takes 20-40
# samples, RL rollouts 8-64, pass@k curves 100 and more.
DEFAULT_MAX_N = 256


OPEN = 2**31  # a limit not known yet (the engine's, before it starts): left open
VLLM_MAX_LOGPROBS = 20  # vLLM's default --max-logprobs (a server does not report its own)


@dataclass(frozen=True)
class Limits:
    """Server-side limits; the engine supplies the context length and the logprobs cap."""

    max_n: int = DEFAULT_MAX_N
    max_model_len: int = 2048
    max_logprobs: int = VLLM_MAX_LOGPROBS
    max_stop_strings: int = 8
    max_stop_chars: int = 200
    max_prompt_chars: int = 100_000
    vocab_size: int | None = None  # token ids below it are the model's; None: the server checks them

    @classmethod
    def of_engine(cls, max_n: int, info: dict) -> Limits:
        """The limits of an engine in this process, from its description (``describe_engine``)."""
        return cls(max_n=max_n, max_model_len=info["max_model_len"], max_logprobs=info["max_logprobs"],
                   vocab_size=info["vocab_size"])

    @classmethod
    def before_engine(cls, max_n: int, max_logprobs: int | None = VLLM_MAX_LOGPROBS) -> Limits:
        """The limits a command line can check before an engine starts, so a typo costs no engine
        start: the engine's context length is not known yet (left open, checked at submission);
        its logprobs cap is the one it will be started with (``max_logprobs``: --max-logprobs, else
        vLLM's default; None: not known, left open)."""
        return cls(max_n=max_n, max_model_len=OPEN, max_logprobs=OPEN if max_logprobs is None else max_logprobs)


@dataclass(frozen=True)
class Setting:
    """What the schema says of one field beyond its type and default.

    ``low``/``high`` bound it (``open_low``/``open_high``: the bound itself is refused); ``limit``
    names the ``Limits`` field that bounds it from above instead. ``rule`` is the refusal's wording
    when the bounds alone would read badly. ``sampler``: a field of vLLM's SamplingParams (``extra``:
    sent to a server outside the OpenAI API's own fields; ``reports_only``: it changes what is
    reported of the tokens, not which tokens are sampled).
    ``sweep``: a sweep may vary it. ``slider``: the page's slider range and step (None: another
    control; a ``limit`` closes the range at the engine's own bound).
    """

    help: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    limit: str | None = None
    rule: str | None = None
    choices: tuple[str, ...] | None = None
    sampler: bool = False
    extra: bool = False
    reports_only: bool = False
    sweep: bool = False
    slider: tuple[float, float | None, float] | None = None


def setting(default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """A SampleRequest field with its Setting (lists get a fresh default each)."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"setting": Setting(**meta)})
    return field(default=default, metadata={"setting": Setting(**meta)})


@dataclass
class SampleRequest:
    """One parent request: a prompt, how many samples, and every sampler setting."""

    prompt: str = setting(help="The text to sample from.")
    n: int = setting(4, low=1, limit="max_n", slider=(1, None, 1), help="Samples (child requests) of the one prompt.")
    seed: int | None = setting(None, help="Base seed: sample i uses seed + i. Blank: a random one, recorded.")
    output_kind: str = setting("CUMULATIVE", choices=OUTPUT_KINDS,
                               help="What each output holds: CUMULATIVE, a sample's text so far · DELTA, only "
                                    "what is new · FINAL_ONLY, one output at the end.")
    mode: str = setting("wrapper", choices=MODES,
                        help="wrapper: our fan-out, sample i seeded seed+i · native: n handed to vLLM · "
                             "same-seed: every sample gets the same seed (the old bug, on purpose)")
    temperature: float = setting(1.0, low=0, high=2, slider=(0, 2, 0.05), sampler=True, sweep=True,
                                 rule="must be between 0 and 2 (vLLM's range)",
                                 help="0 is greedy (needs n=1).")
    top_p: float = setting(1.0, low=0, high=1, open_low=True, slider=(0.01, 1, 0.01), sampler=True, sweep=True,
                           help="Nucleus sampling: the smallest set of tokens whose probability reaches top_p.")
    top_k: int = setting(0, low=-1, high=TOP_K_MOST, sampler=True, extra=True, sweep=True,
                         rule=f"must be -1 or 0 (off) or a positive count up to {TOP_K_MOST}",
                         help="The k most likely tokens (0 or -1: off).")
    min_p: float = setting(0.0, low=0, high=1, slider=(0, 1, 0.01), sampler=True, extra=True, sweep=True,
                           help="Tokens below min_p times the top token's probability are dropped.")
    max_tokens: int = setting(64, low=1, limit="max_model_len", slider=(1, None, 1), sampler=True,
                              rule="must be at least 1",
                              help="Most tokens per sample.")
    presence_penalty: float = setting(0.0, low=-2, high=2, slider=(-2, 2, 0.1), sampler=True, sweep=True,
                                      help="Penalizes tokens that appeared at all.")
    frequency_penalty: float = setting(0.0, low=-2, high=2, slider=(-2, 2, 0.1), sampler=True, sweep=True,
                                       help="Penalizes tokens by how often they appeared.")
    repetition_penalty: float = setting(1.0, low=0, high=2, open_low=True, slider=(0.1, 2, 0.05), sampler=True,
                                        extra=True, sweep=True,
                                        help="Above 1 discourages repeating prompt and output tokens.")
    stop: list[str] = setting([], sampler=True, help="Strings that end a sample (not included in its text).")
    logprobs: int | None = setting(5, low=0, limit="max_logprobs", slider=(0, None, 1), sampler=True, reports_only=True,
                                   help="Top-k logprobs to record per token (none: off).")
    use_chat_template: bool | None = setting(None, help="Wrap the prompt in the model's chat template "
                                                        "(default: when the model has one).")
    ignore_eos: bool = setting(False, sampler=True, extra=True, help="Always run to max_tokens.")
    prefix_token_ids: list[int] | None = setting(None, help="Token ids sent after the rendered prompt as they are, "
                                                            "never re-tokenized: where a branch of another run starts.")
    # Last of the schema, so that a positional call of /sample written before it still fits.
    min_tokens: int = setting(0, low=0, limit="max_model_len", slider=(0, None, 1), sampler=True, extra=True,
                              rule="must be 0 or more",
                              help="Fewest tokens per sample: neither its end-of-sequence token nor a stop string "
                                   "ends it sooner.")

    @classmethod
    def from_user(cls, **raw: Any) -> SampleRequest:
        """Coerce loosely typed input (UI numbers arrive as floats, seeds as text). None leaves a
        field at its default, unless None is one of its values (a blank seed: random; logprobs:
        off; the chat template: the model's). Check with ``check(limits)``."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise InvalidRequest("unknown setting(s): " + ", ".join(name + did_you_mean(name, names)
                                                                   for name in unknown))
        request = cls(prompt=prompt_text(raw.pop("prompt", None)))
        for name, value in raw.items():
            if value is not None:
                setattr(request, name, _COERCE[name](name, value))
            elif name in _NULLABLE:  # a field that may be None: None is its value (logprobs off)
                setattr(request, name, None)
        return request

    def check(self, limits: Limits) -> None:
        """Every check that needs no tokenizer. Raises InvalidRequest naming the first problem."""
        check_prompt_text(self.prompt, limits)
        self.check_each([f.name for f, _ in fields()], limits)
        check_seed(self.seed, self.n)
        check_greedy(self.temperature, self.n)
        if self.max_tokens >= limits.max_model_len:
            raise InvalidRequest(f"max_tokens={self.max_tokens} does not fit the context of {limits.max_model_len} "
                                 "tokens")
        if self.min_tokens > self.max_tokens:
            raise InvalidRequest(f"min_tokens={self.min_tokens} is more than max_tokens={self.max_tokens}: a sample "
                                 "cannot be held to more tokens than it may have")
        if len(self.stop) > limits.max_stop_strings:
            raise InvalidRequest(f"at most {limits.max_stop_strings} stop strings are allowed, got {len(self.stop)}")
        for i, stop in enumerate(self.stop, 1):
            if stop == "":
                raise InvalidRequest(f"stop string #{i} is empty; an empty stop string would end every sample at once")
            if len(stop) > limits.max_stop_chars:
                raise InvalidRequest(f"stop string #{i} is longer than {limits.max_stop_chars} characters")
            _check_text(stop, f"stop string #{i}")
        for position, token_id in enumerate(self.prefix_token_ids or []):
            if token_id < 0 or (limits.vocab_size is not None and token_id >= limits.vocab_size):
                vocabulary = f"0 to {limits.vocab_size - 1}" if limits.vocab_size else "0 or more"
                raise InvalidRequest(f"prefix_token_ids[{position}] is {token_id}, not a token of the model: its ids "
                                     f"are {vocabulary}")

    def check_each(self, names: list[str], limits: Limits) -> None:
        """The settings ``names``, each alone: its choices and bounds (n within --max-n, a seed a
        seed). What depends on two of them (greedy with n, seed + n) waits for ``check``: a command
        line's defaults are checked so before a line's own settings complete the request."""
        schema = dict((f.name, meta) for f, meta in fields())
        for name in names:
            _check_field(self, name, schema[name], limits)

    def sampler_settings(self) -> dict[str, Any]:
        """The settings that decide the sampled tokens, by name (vLLM's SamplingParams fields)."""
        return {f.name: getattr(self, f.name) for f, meta in fields() if meta.sampler}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, request: dict[str, Any], **changes: Any) -> SampleRequest:
        """The request a run record (``run.request``) was made from, with ``changes``: to run it
        again (a replay, a comparison)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in request.items() if k in names}, **changes})


def fields() -> Iterator[tuple[dataclasses.Field, Setting]]:
    """The schema: every SampleRequest field with its Setting, in declaration order."""
    for f in dataclasses.fields(SampleRequest):
        yield f, f.metadata["setting"]


SETTINGS = tuple(f.name for f, _ in fields())  # everything a run was asked for, in the schema's order
TOKEN_SETTINGS = tuple(f.name for f, meta in fields() if meta.sampler and not meta.reports_only)  # decide the tokens
SWEEP_SETTINGS = tuple(f.name for f, meta in fields() if meta.sweep) + ("seed",)  # what a sweep may vary


# A run's id as records and links name it: what this app makes ("run-1a2b3c4d"), and the ids other
# tools write (a uuid, "req_12", "exp/3"). Nothing the page could read as markup.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+=@#-]{0,127}")


def check_run_id(value: Any, what: str) -> None:
    if not isinstance(value, str) or not RUN_ID.fullmatch(value):
        raise InvalidRequest(f"{what} must be a run's id (a letter or digit, then letters, digits and . _ : / + = @ "
                             f"# -, at most 128 characters), got {value!r}")


def check_record(request: Any) -> None:
    """A run record's request (a bundle's, however it was written): each setting the schema knows
    holds a value of its type and, where it has choices, one of them; InvalidRequest names the
    first that does not. Bounds are not checked: a record made by an engine with other limits
    opens as it was made, and Run checks the form's values as it checks any."""
    if not isinstance(request, dict):
        raise InvalidRequest(f"the request must be an object of settings, got {type(request).__name__}")
    known = {name: request[name] for name in SETTINGS if name in request}
    if not isinstance(known.get("prompt", ""), str):
        raise InvalidRequest(f"prompt must be text, got {known['prompt']!r}")
    if "request_id" in request:
        check_run_id(request["request_id"], "request_id")
    for label, key in (("replay", "of"), ("replay", "sampled"), ("branch", "run"), ("rerun", "of")):
        if isinstance(request.get(label), dict) and request[label].get(key) is not None:
            check_run_id(request[label][key], f"{label}.{key}")
    typed = SampleRequest.from_user(**{**known, "prompt": known.get("prompt") or "x"})
    for i, text in enumerate([typed.prompt, *typed.stop]):  # text a page shows and Run sends: no NUL, valid UTF-8
        _check_text(text, "the prompt" if i == 0 else f"stop string #{i}")
    for f, meta in fields():
        if meta.choices is not None and f.name in known and getattr(typed, f.name) not in meta.choices:
            check_choice(f.name, known[f.name], meta.choices)  # named as the file wrote it


def token_settings_changed(request: dict) -> dict[str, Any]:
    """The settings that decide the tokens (``TOKEN_SETTINGS``) that a run's request (a record's
    dict) asked for other than the schema's defaults, in the schema's order: what tells two runs of
    one prompt and seed apart ("temperature 0.3")."""
    changed = {}
    for f, _ in fields():
        if f.name in TOKEN_SETTINGS and f.name in request:
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            if request[f.name] != default and request[f.name] is not None:
                changed[f.name] = request[f.name]
    return changed


def _check_field(request: SampleRequest, name: str, meta: Setting, limits: Limits) -> None:
    value = getattr(request, name)
    if name == "n":
        check_n(value, limits.max_n)
    elif name == "seed":
        check_seed(value, 1)
    elif meta.choices is not None:
        check_choice(name, value, meta.choices)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_bounds(name, value, meta, limits)


def check_n(n: int, max_n: int) -> None:
    if not 1 <= n <= max_n:
        raise InvalidRequest(f"n must be between 1 and {max_n} (--max-n), got {n}")


def did_you_mean(name: str, names) -> str:
    """" (did you mean top_p?)" for a name close to one of ``names`` (a setting typed in another
    case, with dashes, or mistyped), else "": said alike by the API, links and the command line."""
    close = difflib.get_close_matches(name.strip("-").replace("-", "_").lower(), list(names), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def is_greedy(temperature: float) -> bool:
    """vLLM samples greedily (the likeliest token, every time) below this temperature."""
    return temperature < GREEDY_EPS


def check_greedy(temperature: float, n: int) -> None:
    if is_greedy(temperature) and n > 1:
        raise InvalidRequest(
            f"greedy sampling (temperature 0) with n={n} would give {n} identical samples, and vLLM "
            "rejects it: raise the temperature or set n=1"
        )


def check_seed(seed: int | None, n: int) -> None:
    """The base seed must leave room for seed + n - 1 in vLLM's 64-bit range."""
    if seed is None:
        return
    if not 0 <= seed <= MAX_SEED:
        raise InvalidRequest(f"seed must be a whole number from 0 to 2**63-1 ({MAX_SEED}), got {seed}")
    if seed + n - 1 > MAX_SEED:
        raise InvalidRequest(
            f"seed {seed} is too large for n={n}: sample i uses seed+i, which must stay at or below "
            f"2**63-1 ({MAX_SEED}), so the largest base seed for n={n} is {MAX_SEED - n + 1}"
        )


def check_choice(name: str, value: Any, choices) -> None:
    """A setting with choices holds one of them: said alike by the form, the API, a record and a
    caller's own mode."""
    if value not in choices:
        raise InvalidRequest(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def check_mode(mode: str) -> None:
    check_choice("mode", mode, MODES)


def check_context(prompt_tokens: int, max_tokens: int, max_model_len: int, prefix_tokens: int = 0) -> None:
    """The prompt (with a branch's prefix) and every sample's tokens must fit the model's context."""
    if prompt_tokens == 0:
        raise InvalidRequest("the prompt is empty after tokenization")
    what = (f"the prompt has {prompt_tokens} tokens and the prefix {prefix_tokens}" if prefix_tokens
            else f"the prompt has {prompt_tokens} tokens")
    if prompt_tokens + prefix_tokens >= max_model_len:
        raise InvalidRequest(f"{what}, {'together ' if prefix_tokens else ''}longer than the context of "
                             f"{max_model_len} tokens")
    if prompt_tokens + prefix_tokens + max_tokens > max_model_len:
        raise InvalidRequest(
            f"max_tokens={max_tokens} is too big: {what} and the context is {max_model_len}, so at most "
            f"{max_model_len - prompt_tokens - prefix_tokens} tokens fit"
        )


def _check_bounds(name: str, value: float, meta: Setting, limits: Limits) -> None:
    """The field's bounds from its Setting: [low, high], a bound excluded when it is open, the
    upper one from ``limits`` when the Setting names a limit."""
    low, high = meta.low, getattr(limits, meta.limit) if meta.limit else meta.high
    if meta.limit == "max_model_len":
        high = None  # max_tokens and min_tokens: against the context and each other, with sentences of their own
    too_low = low is not None and (value <= low if meta.open_low else value < low)
    too_high = high is not None and (value >= high if meta.open_high else value > high)
    if not (too_low or too_high):
        return
    if meta.rule:
        raise InvalidRequest(f"{name} {meta.rule}, got {value}")
    if meta.limit == "max_logprobs":
        if high >= OPEN:  # before the engine is known (a command line), its cap is not said
            raise InvalidRequest(f"{name} must be {low:g} or more (up to the engine's limit), got {value}")
        raise InvalidRequest(f"{name} must be between {low:g} and the engine's limit of {high}, got {value}")
    left, right = "(" if meta.open_low else "[", ")" if meta.open_high else "]"
    raise InvalidRequest(f"{name} must be in {left}{low:g}, {high:g}{right}, got {value}")


def check_prompt_text(prompt: str, limits: Limits) -> None:
    """The prompt's own checks (text, within --max-prompt-chars): a run's first, and the preview's,
    so nothing unchecked reaches the tokenizer or a server's as it is typed either."""
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


_COERCE = {f.name: BY_TYPE[f.type] for f, _ in fields() if f.name != "prompt"}
_NULLABLE = {f.name for f, _ in fields() if "None" in f.type}
