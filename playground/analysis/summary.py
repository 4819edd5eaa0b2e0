"""One row that says what a run was and what came of it, so runs can be compared side by side
(``pd.concat`` several; ``.T`` for a vertical view of one)."""

from __future__ import annotations

import pandas as pd

from playground.analysis.diff import common_prefix, identical_groups, identical_label
from playground.run import Run

SUMMARY_COLUMNS = ["request_id", "status", "n", "mode", "output_kind", "seed", "prompt_tokens", "tokens",
                   "wall_time", "tokens_per_s", "cached_prompt_tokens", "common_prefix", "any_identical",
                   "identical_samples", "finish_reasons"]


def summary_frame(run: Run) -> pd.DataFrame:
    """The run in one row. ``wall_time`` of a run still going is the last event's time;
    ``identical_samples`` lists groups of samples with equal token ids, like '0=2; 1=3'."""
    tokens = sum(len(s.token_ids) for s in run.samples)
    wall = run.wall_time if run.wall_time is not None else (run.events[-1].t if run.events else None)
    groups = identical_groups(run)
    reasons: dict[str, int] = {}
    for s in run.samples:
        key = s.finish_reason or "running"
        reasons[key] = reasons.get(key, 0) + 1
    row = {
        "request_id": run.request.get("request_id"), "status": run.status, "n": run.n,
        "mode": run.request.get("mode"), "output_kind": run.output_kind, "seed": run.request.get("seed"),
        "prompt_tokens": run.request.get("num_prompt_tokens"), "tokens": tokens, "wall_time": wall,
        "tokens_per_s": tokens / wall if wall else None,
        "cached_prompt_tokens": [s.num_cached_tokens for s in run.samples],
        "common_prefix": common_prefix(run), "any_identical": bool(groups),
        "identical_samples": identical_label(groups),
        "finish_reasons": ", ".join(f"{k} ×{v}" for k, v in reasons.items()),
    }
    return pd.DataFrame([row], columns=SUMMARY_COLUMNS)
