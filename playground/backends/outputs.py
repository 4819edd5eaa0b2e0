"""vLLM's RequestOutputs as Observations, copied at once.

vLLM hands out live objects (a CUMULATIVE token list keeps growing after it was yielded, and
RequestStateStats keeps changing), so everything the record keeps is copied when it arrives.
"""

from __future__ import annotations

from typing import Any

from vllm import TokensPrompt
from vllm.logprobs import FlatLogprobs

from playground.backends.pieces import Spelling
from playground.backends.recorder import Observation
from playground.run import Event, EventOutput, TokenLogprob
from playground.sampling.params import sampling_params


class SoFar:
    """Each index's token count and text at its previous output, so a CUMULATIVE output can be
    taken as what it added: copying each whole output as it arrives costs a run of length L
    L^2/2 copies (and its memory), the addition only L."""

    def __init__(self):
        self.ids: dict[int, int] = {}
        self.text: dict[int, str] = {}

    def output(self, c: Any, text: str, observation: Observation) -> EventOutput:
        """``c``'s part of the event (``text``: its text): its addition when it extends its
        index's previous output (noted in ``observation.additions``), else the whole of it."""
        index, ids = c.index, c.token_ids
        before, previous = self.ids.get(index, 0), self.text.get(index, "")
        self.ids[index], self.text[index] = len(ids), text
        if len(ids) >= before and text.startswith(previous):
            observation.additions[index] = (before, len(previous))
            return EventOutput(index, text[len(previous):], list(ids[before:]), c.finish_reason, c.stop_reason)
        return EventOutput(index, text, list(ids), c.finish_reason, c.stop_reason)


class PromptEcho:
    """vLLM's own texts without the prompt's text its fast detokenizer puts before a sample's
    first text when the prompt ends inside a character (``TokenTable.echo``; vLLM issue #48853),
    as a branch from a point inside a character does. Where a stop string is in that echo, vLLM
    stopped the sample there: its text is kept as vLLM gave it."""

    def __init__(self, lead: str, cumulative: bool):
        self.lead, self.cumulative = lead, cumulative
        self.begun: set[int] = set()  # DELTA: the indices whose first text came

    def text(self, index: int, text: str) -> str:
        if not text or (not self.cumulative and index in self.begun):
            return text
        self.begun.add(index)
        return text[len(self.lead):] if text.startswith(self.lead) else text


def observation_from_output(output: Any, t: float, child_facts: bool = True, engine_requests: int | None = None,
                            so_far: SoFar | None = None, spelling: Spelling | None = None,
                            echo: PromptEcho | None = None) -> Observation:
    """Copy a vLLM RequestOutput into an Observation, at once.

    In CUMULATIVE mode vLLM hands out its live token list, which keeps growing after the output
    was yielded; copying now keeps each event as it was. ``so_far`` (CUMULATIVE): copy only what
    each output added since the previous one of its index, and say so; the recorder puts the
    whole back together.

    A parent output carries the cached-token count and metrics of one child only: the one whose
    output it was built from, which is ``outputs[0]`` for streamed kinds. ``child_facts=False``
    skips that attribution where it does not hold (FINAL_ONLY with n > 1) or where the caller
    observes each child directly (the wrapper). ``engine_requests``: how many requests the engine
    had unfinished when this output was yielded. ``spelling``: the run's texts come from the token
    table (the engine was asked not to detokenize), with one piece per new token; else ``echo``,
    when vLLM's texts begin with the prompt's.
    """
    observation = Observation()
    texts, logprobs = observation.token_texts, observation.logprobs
    read = spelling.read if spelling is not None else None
    # A DELTA output's ids are its own list, which nothing changes once it was yielded: not copied.
    # (Its kind is known here by the spelling's; a DELTA run vLLM spells itself is copied, as before.)
    fresh = spelling is not None and not spelling.cumulative
    outputs = []
    for c in output.outputs:
        index, ids, text = c.index, c.token_ids, c.text
        if read is not None:
            text, texts[index] = read(index, ids, c.finish_reason)
        elif echo is not None:
            text = echo.text(index, text)
        outputs.append(so_far.output(c, text, observation) if so_far is not None else
                       EventOutput(index, text, ids if fresh else list(ids), c.finish_reason, c.stop_reason))
        if c.logprobs:
            # vLLM's flat arrays (``SamplingParams.flat_logprobs``) go to the record as they are;
            # only the positions of this output's tokens are read (a CUMULATIVE one's keep growing).
            logprobs[index] = ((c.logprobs, 0) if isinstance(c.logprobs, FlatLogprobs)
                               else logprobs_from_vllm(ids, c.logprobs))
    observation.event = Event(t=t, finished=bool(output.finished), outputs=outputs,
                              num_cached_tokens=output.num_cached_tokens, request_id=output.request_id,
                              engine_requests=engine_requests)
    if child_facts and output.outputs:
        child_observation(output.outputs[0].index, output, observation)
    return observation


def child_observation(index: int, output: Any, into: Observation | None = None) -> Observation:
    """What one child's own output (before merging) says about that child alone, added to
    ``into`` (else to an observation of its own, with no event)."""
    facts = Observation() if into is None else into
    if output.num_cached_tokens is not None:
        facts.num_cached_tokens[index] = output.num_cached_tokens
    if output.metrics is not None:
        facts.metrics[index] = metrics_snapshot(output.metrics)
    return facts


def table_spelling(backend: Any, prepared: Any) -> Spelling | None:
    """The run's texts from the backend's token table (``TokenTable.spelling`` says when they are
    vLLM's own), and then the engine need not detokenize. Not for the QA matrix (a ``watch``):
    it checks what vLLM itself hands out, text included."""
    table = getattr(backend, "token_table", None)
    if table is None or prepared.watch:
        return None
    request = prepared.request
    return table.spelling(prepared.engine_prompt_ids, request.output_kind, request.stop)


class OutputReader:
    """One run's outputs as observations, for both front ends that hold vLLM's outputs (AsyncLLM on
    its loop, LLMEngine stepped): the texts spelled from the token table (and the engine asked not
    to detokenize), CUMULATIVE outputs taken as what they added, every output kept when the QA
    matrix watches. ``params`` and ``tokens`` are what the sampler is given."""

    def __init__(self, backend: Any, prepared: Any, child_facts: bool):
        request = prepared.request
        self.spelling = table_spelling(backend, prepared)
        table = getattr(backend, "token_table", None)
        lead = table.echo(prepared.engine_prompt_ids) if table is not None and self.spelling is None else ""
        # vLLM's own texts, when they begin with the prompt's (not for the QA matrix: it checks them as they are)
        self.echo = PromptEcho(lead, request.output_kind != "DELTA") if lead and not prepared.watch else None
        self.params = sampling_params(request, detokenize=self.spelling is None)
        self.tokens = TokensPrompt(prompt_token_ids=prepared.engine_prompt_ids, prompt=prepared.rendered_prompt)
        self.child_facts = child_facts  # see observation_from_output
        self.watch = OutputWatch() if prepared.watch else None
        self.so_far = SoFar() if request.output_kind == "CUMULATIVE" else None

    def observe(self, output: Any, t: float, engine_requests: int | None) -> Observation:
        if self.watch is not None:
            self.watch.keep(output)
        return observation_from_output(output, t, child_facts=self.child_facts, engine_requests=engine_requests,
                                       so_far=self.so_far, spelling=self.spelling, echo=self.echo)

    def end(self) -> Observation | None:
        """The run's last observation, when the QA matrix watches: which outputs changed later."""
        return Observation(mutated_events=self.watch.changed()) if self.watch is not None else None


def logprobs_from_vllm(token_ids, positions) -> list[TokenLogprob]:
    """vLLM's per-position {token_id: Logprob} dicts as TokenLogprobs (sampled token first)."""
    result = []
    for token_id, position in zip(token_ids, positions):
        chosen = position.get(token_id)
        top = sorted(
            ((tid, lp.logprob, lp.decoded_token, lp.rank) for tid, lp in position.items()),
            key=lambda item: item[3] if item[3] is not None else 1 << 30,
        )
        result.append(TokenLogprob(
            token_id=token_id,
            logprob=chosen.logprob if chosen else None,
            rank=chosen.rank if chosen else None,
            text=chosen.decoded_token if chosen else None,
            top=[(tid, lp, text) for tid, lp, text, _ in top],
        ))
    return result


def metrics_snapshot(stats: Any) -> dict[str, float]:
    """Copy the timing fields of vLLM's live RequestStateStats."""
    names = ("arrival_time", "queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts",
             "first_token_latency", "num_generation_tokens")
    return {name: getattr(stats, name) for name in names if hasattr(stats, name)}


class OutputWatch:
    """Keeps every output a path yielded, with a snapshot taken when it was yielded, to tell at
    the end which ones changed afterwards.

    vLLM once handed out CUMULATIVE outputs that later tokens kept changing: a consumer that kept
    references (a list of outputs, say) saw old outputs grow. The QA matrix's ``no-mutation`` rule
    reads what this finds. Only the QA matrix asks for it: it holds every output of the run.
    """

    def __init__(self):
        self._kept: list[tuple[Any, tuple]] = []

    def keep(self, output: Any) -> None:
        self._kept.append((output, _snapshot(output)))

    def changed(self) -> list[int]:
        """Numbers (in yield order) of the outputs that no longer match their snapshot."""
        return [number for number, (output, snapshot) in enumerate(self._kept) if _snapshot(output) != snapshot]


def _snapshot(output: Any) -> tuple:
    return (output.request_id, bool(output.finished),
            tuple((c.index, c.text, tuple(c.token_ids), c.finish_reason) for c in output.outputs))
