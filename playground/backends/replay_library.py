"""The runs a replay can play, and which one a request gets.

Runs come from saved bundles (a page's export, or batch and sweep JSONL; ``playground.bundles``
reads them and names a bad line) or are made up (``synthetic:256x1000``: a run of n=256 x 1,000
tokens with top-5 logprobs, for measuring the app at any pace; ``synthetic:256x1000:0`` without
logprobs, ``:K`` with the top-K). A run that cannot be replayed (no
events: it was built, not recorded; events that disagree with its samples) is refused with a
sentence naming it.

Which run a request gets, when it does not name one: the run of its prompt whose settings are
closest to the request's (most settings equal; the first in the file on a tie), and when no run
has that prompt (or the request has none), the file's next run in turn. Either way the replay's
record says which run it plays, and why when the request's settings differ (``choose``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from playground.backends.synthetic import TOP_LOGPROBS, synthetic_run
from playground.bundles import DEFAULT_LIMITS, ReadLimits, read_runs
from playground.errors import InvalidBundle
from playground.request import SETTINGS, Limits, SampleRequest
from playground.run import Run

SYNTHETIC = re.compile(r"^synthetic:(\d+)x(\d+)(?::(\d+))?$")  # n x tokens, then top-K logprobs (5; 0: none)
MAX_SYNTHETIC_LOGPROBS = 20  # vLLM's own default ceiling
MAX_SYNTHETIC_TOKENS = 1_000_000  # n x tokens: a made-up run is held in memory whole
# What a record's request holds beyond the settings that a replay must not take from its source:
# the record writes these afresh for the replay.
RECORD_KEYS = ("request_id", "rendered_prompt", "prompt_token_ids", "num_prompt_tokens", "replay")



def synthetic_spec(source: str) -> tuple[int, int, int] | None:
    """``synthetic:NxTOKENS[:K]`` as (n, tokens, the top K logprobs); None for anything else."""
    found = SYNTHETIC.match(source)
    return None if found is None else (int(found[1]), int(found[2]), int(found[3] or TOP_LOGPROBS))

@dataclass
class Library:
    """Replayable runs by request id (the first of a file's runs with one id is kept)."""

    runs: list[Run]
    name: str = "the runs"
    by_id: dict[str, Run] = field(init=False)
    _vocabulary: dict[int, str] | None = field(init=False, default=None, repr=False)

    def __post_init__(self):
        if not self.runs:
            raise InvalidBundle(f"{self.name} holds no run to replay")
        for run in self.runs:
            check_replayable(run)
        self.by_id = {}
        for run in self.runs:
            self.by_id.setdefault(str(run.request.get("request_id")), run)

    @classmethod
    def read(cls, sources: list[str], limits: ReadLimits = DEFAULT_LIMITS) -> Library:
        """Runs from files of bundles and ``synthetic:NxTOKENS[:K]`` specs, in the order given;
        InvalidBundle naming the file (and line) that cannot be replayed."""
        runs: list[Run] = []
        for source in sources:
            if (spec := synthetic_spec(source)) is not None:
                n, tokens, top = spec
                if not (1 <= n <= limits.max_samples and 1 <= tokens and n * tokens <= MAX_SYNTHETIC_TOKENS):
                    raise InvalidBundle(f"{source}: a synthetic run has 1 to {limits.max_samples} samples and at most "
                                        f"{MAX_SYNTHETIC_TOKENS:,} tokens in all")
                if top > MAX_SYNTHETIC_LOGPROBS:
                    raise InvalidBundle(f"{source}: a synthetic run has the top 0 to {MAX_SYNTHETIC_LOGPROBS} logprobs "
                                        f"(the number after the second colon)")
                runs.append(synthetic_run(n, tokens, seed=len(runs), logprobs=top or None, events=True))
                continue
            if source.startswith("synthetic:") and not Path(source).exists():
                raise InvalidBundle(f"{source} is not a made-up run: write synthetic:NxTOKENS, numbers, e.g. "
                                    "synthetic:256x1000 (top-5 logprobs), or synthetic:256x1000:0 (none)")
            file_runs = read_runs(source, limits)
            for number, run in enumerate(file_runs, 1):
                try:
                    check_replayable(run)
                except InvalidBundle as e:
                    where = f"run {number} ({run.request.get('request_id')})" if len(file_runs) > 1 else "its run"
                    raise InvalidBundle(f"{source}, {where}: {e}") from None
            runs += file_runs
        names = ", ".join(sources[:3]) + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")
        return cls(runs, names)

    # --- what the replay backend asks -----------------------------------------------------------

    @property
    def max_n(self) -> int:
        return max(run.n for run in self.runs)

    @property
    def max_model_len(self) -> int:
        """A context every run fits (the engine's it was recorded on, else its prompt and tokens) and
        the form's requests too (at least the usual context: a request only picks a run)."""
        return max(Limits().max_model_len, *(max(run.engine.get("max_model_len") or 0,
                       len(run.request.get("prompt_token_ids") or [])
                       + len(run.request.get("prefix_token_ids") or []) + int(run.request.get("max_tokens") or 0) + 1)
                   for run in self.runs))

    @property
    def max_logprobs(self) -> int:
        return max([20, *(run.engine.get("max_logprobs") or 0 for run in self.runs),
                    *(int(run.request.get("logprobs") or 0) for run in self.runs)])

    def get(self, request_id: str) -> Run | None:
        return self.by_id.get(str(request_id))

    def choose(self, request: SampleRequest, after: str | None = None) -> tuple[Run, str | None]:
        """The run ``request`` gets, and why when it is not the run the request describes
        (None: the run of its prompt with every one of its settings). Without a run of its prompt,
        the file's next run after ``after`` (the run the asking page shows, by id), else its first:
        each page steps through the file from its own place, and a rehearsal on one browser never
        moves what plays first on another."""
        order = list(self.by_id.values())  # by position: a Run compares field by field, samples and all
        same_prompt = [k for k, run in enumerate(order) if run.request.get("prompt") == request.prompt]
        if not same_prompt:
            ids = list(self.by_id)
            k = (ids.index(after) + 1) % len(order) if after in self.by_id else 0
            if not request.prompt.strip():
                return order[k], "no prompt was given: the file's next run plays"
            return order[k], "the file has no run of this prompt: its next run plays"
        asked = request.to_dict()
        # A setting a record leaves out (a made-up run's sampler settings, an older bundle's) is
        # the schema's default, as the run's form shows it.
        recorded = {k: SampleRequest.from_record(order[k].request).to_dict() for k in same_prompt}
        differs = {k: [name for name in SETTINGS if name not in ("prompt", "use_chat_template")
                       and asked.get(name) is not None and recorded[k].get(name) != asked.get(name)]
                   for k in same_prompt}
        best = min(same_prompt, key=lambda k: len(differs[k]))
        if not differs[best]:
            return order[best], None
        return order[best], f"the file's run of this prompt closest to the form's settings plays; it differs in " \
                            f"{', '.join(differs[best])}"

    def rendered(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]] | None:
        """The rendered prompt and its token ids of a run of ``prompt`` (None: no run has it)."""
        runs = [run for run in self.by_id.values() if run.request.get("prompt") == prompt]
        for run in sorted(runs, key=lambda r: bool(r.request.get("use_chat_template")) != use_chat_template):
            ids = run.request.get("prompt_token_ids")
            if ids:
                return run.request.get("rendered_prompt") or prompt, list(ids)
        return None

    def decode(self, token_ids: list[int]) -> str:
        """Token ids as text, from the pieces the runs recorded (``⟨id N⟩`` for an id they never
        showed): a replay has no tokenizer."""
        if self._vocabulary is None:
            vocabulary: dict[int, str] = {}
            for run in self.runs:
                for s in run.samples:
                    vocabulary.update(zip(s.token_ids, s.token_texts))
                    for lp in s.logprobs or []:
                        vocabulary.update((tid, text) for tid, _, text in lp.top if text is not None)
            self._vocabulary = vocabulary
        return "".join(self._vocabulary.get(t, f"⟨id {t}⟩") for t in token_ids)


def source_request(run: Run) -> tuple[SampleRequest, dict]:
    """The request a recorded run was made from, and what else its record said of it (a branch, a
    sweep's value), to be said of its replay too."""
    extra = {k: v for k, v in run.request.items() if k not in SETTINGS and k not in RECORD_KEYS}
    return SampleRequest.from_record(run.request), extra


def check_replayable(run: Run) -> None:
    """InvalidBundle unless the run's events give back its samples' tokens: a replay plays the
    events, so a run without them (built, not recorded) or whose events disagree cannot be played."""
    if not run.events:
        raise InvalidBundle("it has no events (it was put together, not recorded as it streamed), so there is "
                            "nothing to replay")
    delta = run.output_kind == "DELTA"
    counts = [0] * run.n
    for event in run.events:
        for out in event.outputs:
            if not 0 <= out.index < run.n:
                raise InvalidBundle(f"an event names sample {out.index}, and the run has {run.n}")
            counts[out.index] = counts[out.index] + len(out.token_ids) if delta else len(out.token_ids)
    for s in run.samples:
        if counts[s.index] != len(s.token_ids) or len(s.token_texts) != len(s.token_ids):
            raise InvalidBundle(f"its events give sample {s.index} {counts[s.index]} tokens, and the sample has "
                                f"{len(s.token_ids)} ({len(s.token_texts)} with text)")
