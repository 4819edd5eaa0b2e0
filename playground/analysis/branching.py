"""Branches: runs that resample from a point of another run's sample, with a token of a person's
choice there or none.

A branch from sample i of a run at token k is a new request whose prompt is the run's rendered
prompt, then sample i's first k tokens (``prefix_token_ids``, sent as ids, never re-tokenized),
then, when asked, a forced token: one of the top-k alternatives the model saw at k, or any id.
Its record says where it came from (``request.branch``); its samples hold only the new tokens.

The what-if view runs one branch per alternative at a point and puts what each branch's samples
say side by side: the alternative's probability there, the majority answer (or why there is
none) and the vote share, and how diverse the branch's samples are; ``graft`` makes one tree of
them, each branch under its token, for the divergence tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from playground.analysis.answers import Extractor, group_answers
from playground.analysis.display import continued_text, for_hover, pieces, token_name, visible
from playground.analysis.diversity import distinct_n
from playground.analysis.tree import tree_figure
from playground.run import Run, Sample, TokenLogprob

MAX_ALTERNATIVES = 5  # branches of one what-if: each is a run of n samples
WHAT_IF_COLUMNS = ["token", "token_id", "probability", "samples", "majority", "vote_share", "distinct_2", "request_id"]


@dataclass(frozen=True)
class Alternative:
    """A token the model could have sampled at a position, with its probability there."""

    token_id: int
    probability: float | None
    text: str


@dataclass(frozen=True)
class BranchPoint:
    """Where a branch starts: sample ``sample`` of run ``run`` (a request id) after ``position``
    of its tokens, with ``forced_token_id`` next (None: the model samples it)."""

    run: str
    sample: int
    position: int
    forced_token_id: int | None = None
    forced_text: str | None = None
    prefix_text: str | None = None  # what the branch's samples continue (``branch_lead``), for people

    def to_dict(self) -> dict[str, Any]:
        """The record's ``request.branch``."""
        return {"run": self.run, "sample": self.sample, "position": self.position,
                "forced_token_id": self.forced_token_id, "forced_text": self.forced_text,
                **({"prefix_text": self.prefix_text} if self.prefix_text is not None else {})}


def branch_prefix(parent: Run, sample: int, position: int, forced_token_id: int | None = None) -> list[int]:
    """The tokens after the parent's rendered prompt: the parent's own prefix (a branch of a
    branch), sample ``sample``'s first ``position`` tokens, then the forced token."""
    if not 0 <= sample < parent.n:
        raise ValueError(f"sample {sample} is not one of the run's {parent.n} samples")
    tokens = parent.samples[sample].token_ids
    if not 0 <= position <= len(tokens):
        raise ValueError(f"token {position} is not within sample {sample}'s {len(tokens)} tokens")
    return [*(parent.request.get("prefix_token_ids") or []), *tokens[:position],
            *([] if forced_token_id is None else [forced_token_id])]


def branch_lead(parent: Run, sample: int, position: int, forced_text: str | None = None) -> str:
    """The text a branch's samples continue, after the prompt: the parent's own lead (a branch of
    a branch), sample ``sample``'s first ``position`` tokens, then the forced token's text. Its
    samples hold only their new tokens, and read as fragments without it."""
    return continued_text(parent) + "".join(pieces(parent.samples[sample])[:position]) + (forced_text or "")


def alternatives(run: Run, sample: int, position: int, k: int = MAX_ALTERNATIVES) -> list[Alternative]:
    """The top ``k`` tokens the model saw at ``position`` of ``sample`` (from its logprobs), most
    likely first; the sampled token among them. Empty without logprobs there."""
    logprobs = run.samples[sample].logprobs or []
    if position >= len(logprobs):
        return []
    at: TokenLogprob = logprobs[position]
    return [Alternative(token_id, _probability(logprob), text if text is not None else token_name(token_id))
            for token_id, logprob, text in at.top[:k]]


def branched_from(run: Run | None) -> str | None:
    """The request id of the run ``run`` was branched from (None: no run, or no branch)."""
    return (run.request.get("branch") or {}).get("run") if run is not None else None


def branch_label(run: Run) -> str | None:
    """Where a branched run came from, for people: "branched from #3 at token 7, forced ' Paris'"
    (None for a run that is no branch)."""
    branch = run.request.get("branch")
    if not branch:
        return None
    where = f"branched from #{branch['sample']} at token {branch['position']}"
    if branch.get("forced_token_id") is not None:
        text = branch.get("forced_text")
        where += f", forced {text!r}" if text is not None else f", forced token {branch['forced_token_id']}"
    return f"{where} of {branch['run']}"


def what_if_table(branches: list[tuple[Alternative, Run]], extractor: Extractor | str | None = None,
                  before: str = "") -> pd.DataFrame:
    """Per alternative (one branch run each): its probability at the point, and what its samples
    say: the majority answer (read by ``extractor``), or, when no answer has more votes than every
    other, why there is none ("no majority: all 8 answers differ", ``Answers.majority_text``); the
    vote share, the most common answer's share of the branch's samples (in a tie, each tied
    answer's); and distinct-2. An answer is read from the whole text a sample ends up with:
    ``before`` (the sampled text before the point), the forced token, then the branch's own."""
    rows = []
    for alternative, run in branches:
        asked = {k: v for k, v in run.request.items() if k != "branch"}  # its lead is said here
        whole = Run(request=asked, samples=[Sample(index=s.index, seed=s.seed, token_ids=s.token_ids,
                                                   text=before + alternative.text + s.text) for s in run.samples])
        answers = group_answers(whole, extractor)
        rows.append({"token": visible(alternative.text), "token_id": alternative.token_id,
                     "probability": alternative.probability, "samples": run.n,
                     "majority": answers.majority_text(), "vote_share": answers.vote_share,
                     "distinct_2": distinct_n([s.token_ids for s in run.samples], 2),
                     "request_id": run.request.get("request_id")})
    return pd.DataFrame(rows, columns=WHAT_IF_COLUMNS)


def graft(branches: list[tuple[Alternative, Run]]) -> Run:
    """One run whose samples are every branch's samples, each behind its branch's forced token:
    its divergence tree splits first at the alternatives, then wherever each branch's samples part."""
    samples = []
    for alternative, run in branches:
        for s in run.samples:
            lead = TokenLogprob(alternative.token_id, math.log(alternative.probability)
                                if alternative.probability else None, None, alternative.text)
            samples.append(Sample(index=len(samples), seed=s.seed, text=alternative.text + s.text,
                                  token_ids=[alternative.token_id, *s.token_ids],
                                  token_texts=[alternative.text, *s.token_texts],
                                  token_times=[0.0, *s.token_times],
                                  logprobs=[lead, *s.logprobs] if s.logprobs is not None else None,
                                  finish_reason=s.finish_reason))
    first = branches[0][1].request if branches else {}
    return Run(request={**first, "request_id": "what-if", "n": len(samples)}, samples=samples, status="finished")


def aligned(a: Run, b: Run) -> tuple[Run, Run, str | None]:
    """Two runs to compare token by token: when one is a branch of the other, the branch's samples
    behind the tokens it was sent after (the parent sample's first k tokens, then the forced token),
    so that token k of a branch sample stands beside token k of the parent's samples; with the
    sentence that says so. Other pairs are returned as they are, with None."""
    for parent, branch, name in ((a, b, "B"), (b, a, "A")):
        point = branch.request.get("branch") or {}
        if point.get("run") != parent.request.get("request_id") or not 0 <= point.get("sample", -1) < parent.n:
            continue
        source, k = parent.samples[point["sample"]], point["position"]
        lead_ids = source.token_ids[:k] + ([point["forced_token_id"]] if point.get("forced_token_id") is not None
                                           else [])
        lead_texts = pieces(source)[:k] + ([point.get("forced_text") or token_name(point['forced_token_id'])]
                                           if point.get("forced_token_id") is not None else [])
        lead = "".join(lead_texts)
        behind = [replace(s, text=lead + s.text, token_ids=lead_ids + s.token_ids,
                          token_texts=lead_texts + pieces(s), token_times=[], logprobs=None)
                  for s in branch.samples]
        grafted = replace(branch, samples=behind, events=[])
        note = (f"{name} is a branch of the other run from its sample #{point['sample']} at token {k}: each of "
                f"{name}'s samples is compared behind that sample's first {k} tokens"
                f"{' and the forced token' if point.get('forced_token_id') is not None else ''}, the tokens "
                "it was sent after, so that token positions line up. The figures side by side are each run's "
                f"own: {name}'s measure the tokens it sampled after that point, not the ones it was sent after.")
        return (a, grafted, note) if name == "B" else (grafted, b, note)
    return a, b, None


def what_if_tree(branches: list[tuple[Alternative, Run]]) -> go.Figure:
    """The grafted branches' divergence tree, its title saying which numbers are whose: in one tree
    the branches' samples are numbered on from one branch to the next (each branch's own are 0 to
    n - 1), and a hover's "samples [5, 6]" must be readable as the second branch's."""
    fig = tree_figure(graft(branches))
    spans, first = [], 0
    for alternative, run in branches:
        token = f"“{visible(alternative.text, multiline=False)}”"  # quoted: its own '·' is a space, not a separator
        spans.append(f"{token} #{first}–{first + run.n - 1}" if run.n > 1 else f"{token} #{first}")
        first += run.n
    fig.update_layout(title_text=f"{fig.layout.title.text}<br><sup>samples numbered across the branches: "
                                 f"{for_hover('; '.join(spans))}</sup>")
    return fig


def _probability(logprob: float | None) -> float | None:
    return None if logprob is None or math.isnan(logprob) else math.exp(logprob)
