"""Runs side by side: each run in one row, sample i of run A against sample i of run B, and the runs
whose samples share seeds.

With the same base seed, sample i has the same seed in both runs, so the first token where they
part is the first token the difference between the runs (a setting, the mode, the batch they
shared) changed. Comparisons are over token ids, like every other in the playground.

Runs that share child seeds are not independent sets of samples. Sample i of a run is seeded
seed + i, so two runs whose base seeds are close draw some of the same samples: runs with seeds 42
and 43 at n = 8 share seeds 43..49, seven of their eight samples. Pooling such runs, or comparing
them as if independent, counts those samples twice.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence

import pandas as pd

from playground.analysis.diff import (
    common_prefix,
    diff_html,
    diff_samples,
    first_divergence,
    identical_groups,
    identical_label,
    similarity,
)
from playground.analysis.display import token_at
from playground.analysis.replays import origin_label, replayed_from
from playground.analysis.sweep_views import Measures, all_measures, first_words, measures_for_people
from playground.request import SETTINGS
from playground.run import Run

# Settings worth naming when they differ between two runs (the rest is the record's plumbing).
PAIR_COLUMNS = ["sample", "seed_a", "seed_b", "tokens_a", "tokens_b", "first_divergence", "token_a", "token_b",
                "similarity", "verdict"]
RUN_COLUMNS = ["request_id", "status", "n", "mode", "output_kind", "seed", "prompt_tokens", "tokens", "wall_time",
               "tokens_per_s", "cached_prompt_tokens", "common_prefix", "any_identical", "identical_samples",
               "finish_reasons"]


def run_label(run: Run) -> str:
    """The run's id, and what it replays when it is a replay, or that it was written by hand
    (reports and comparisons say so)."""
    label = str(run.request.get("request_id", "run"))
    return f"{label} ({origin})" if (origin := origin_label(run)) else label


def run_row(run: Run) -> pd.DataFrame:
    """What the run was and what came of it, as a one-row table: runs side by side are
    ``pd.concat`` of theirs, one run read down is ``.T``. ``wall_time`` of a run still going is
    the last event's time; ``identical_samples`` lists groups of samples with equal token ids,
    like '0=2; 1=3'."""
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
    return pd.DataFrame([row], columns=RUN_COLUMNS)


def settings_diff(a: Run, b: Run) -> pd.DataFrame:
    """The settings that differ between the two runs' requests: the likely cause of what differs.
    Each value as it was (a seed stays a whole number beside a list), "none" for one not given."""
    said = lambda value: "none" if value is None else value  # noqa: E731
    rows = [{"setting": k, "A": said(a.request.get(k)), "B": said(b.request.get(k))}
            for k in SETTINGS if a.request.get(k) != b.request.get(k)]
    if a.engine.get("model") != b.engine.get("model"):
        rows.append({"setting": "model", "A": said(a.engine.get("model")), "B": said(b.engine.get("model"))})
    return pd.DataFrame(rows, columns=["setting", "A", "B"], dtype=object)


def pair_frame(a: Run, b: Run) -> pd.DataFrame:
    """One row per sample index: the seeds, the lengths, where A's sample i and B's sample i first
    differ (empty when identical) and the token each has there, the similarity, and a verdict."""
    a_by, b_by = {s.index: s for s in a.samples}, {s.index: s for s in b.samples}
    rows = []
    for i in sorted(set(a_by) | set(b_by)):
        sa, sb = a_by.get(i), b_by.get(i)
        if sa is None or sb is None:
            only = "A" if sb is None else "B"
            rows.append({"sample": i, "seed_a": sa.seed if sa else None, "seed_b": sb.seed if sb else None,
                         "tokens_a": len(sa.token_ids) if sa else None, "tokens_b": len(sb.token_ids) if sb else None,
                         "verdict": f"only in run {only}"})
            continue
        where = first_divergence(sa.token_ids, sb.token_ids)
        rows.append({
            "sample": i, "seed_a": sa.seed, "seed_b": sb.seed, "tokens_a": len(sa.token_ids),
            "tokens_b": len(sb.token_ids), "first_divergence": where,
            "token_a": None if where is None else token_at(sa, where),
            "token_b": None if where is None else token_at(sb, where),
            "similarity": similarity(sa.token_ids, sb.token_ids),
            "verdict": "identical" if where is None else f"diverged at token {where}",
        })
    frame = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    return frame.astype({"first_divergence": "Int64", "seed_a": "Int64", "seed_b": "Int64", "tokens_a": "Int64",
                         "tokens_b": "Int64"})


def identical_pairs(frame: pd.DataFrame) -> str:
    """How many of ``pair_frame``'s pairs are identical, as a headline says it: out of the pairs,
    and, when the runs' n differ, how many samples of the wider run have no partner."""
    alone = frame["verdict"].str.startswith("only in run")
    same, pairs = int((frame["verdict"] == "identical").sum()), int((~alone).sum())
    if not alone.any():
        return f"{same} of {pairs} samples identical"
    wider = frame.loc[alone, "verdict"].iloc[0].removeprefix("only in run ")
    return (f"{same} of {pairs} sample pairs identical ({int(alone.sum())} of run {wider}'s samples have no "
            "partner of the same index)")


def unpaired_seeds_note(frame: pd.DataFrame) -> str | None:
    """A sentence when no pair of ``pair_frame`` shares its seed (the runs' base seeds differ):
    then sample i of A and sample i of B are independent draws, and where they part says nothing
    of the settings that differ; None when a pair does, or no seed is known."""
    both = frame.dropna(subset=["seed_a", "seed_b"])
    if both.empty or (both["seed_a"] == both["seed_b"]).any():
        return None
    return (f"No pair shares its seed (A's sample 0 has seed {both['seed_a'].iloc[0]}, B's "
            f"{both['seed_b'].iloc[0]}): each pair is two independent draws, so where they part says nothing "
            "of the settings; the figures side by side compare the two sets.")


def measures_side_by_side(a: Run, b: Run, measures: Measures | None = None) -> pd.DataFrame:
    """One row per measure: A's value, B's value, and B - A where both are numbers (a majority
    that did not settle says "not within n": ``measures_for_people``)."""
    ma = measures_for_people(all_measures(a, measures), a.n)
    mb = measures_for_people(all_measures(b, measures), b.n)
    rows = []
    for name in list(dict.fromkeys([*ma, *mb])):
        va, vb = ma.get(name), mb.get(name)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (va, vb))
        rows.append({"figure": name, "A": va, "B": vb, "B - A": vb - va if numbers else None})
    return pd.DataFrame(rows, columns=["figure", "A", "B", "B - A"])


def comparison_html(a: Run, b: Run, words: int = 40, frame: pd.DataFrame | None = None) -> str:
    """Both runs' columns, index by index: each pair's verdict, and B's sample token by token
    against A's (inserted and replaced tokens highlighted). ``frame``: ``pair_frame(a, b)`` when
    the caller has it (it diffs every pair)."""
    a_by, b_by = {s.index: s for s in a.samples}, {s.index: s for s in b.samples}
    frame = pair_frame(a, b) if frame is None else frame
    parts = [(f"<p class='compare-headline'><b>{html.escape(identical_pairs(frame))}</b> between run A "
              f"(<code>{html.escape(run_label(a))}</code>) and run B (<code>{html.escape(run_label(b))}</code>); "
              "below, B's sample token by token against A's sample of the same index.</p>")]
    for row in frame.itertuples():
        sa, sb = a_by.get(row.sample), b_by.get(row.sample)
        verdict = row.verdict if pd.isna(row.first_divergence) else (
            f"{row.verdict}: A has “{row.token_a}”, B has “{row.token_b}”")
        cells = []
        for name, sample in (("A", sa), ("B", sb)):
            text = "—" if sample is None else html.escape(first_words(sample, words))
            seed = "" if sample is None else f" · seed {sample.seed}"
            cells.append(f"<div class='compare-cell' style='flex:1;min-width:0'><b>{name}</b>{seed}<br>{text}</div>")
        diff = ""
        if sa is not None and sb is not None:
            diff = diff_html(diff_samples(sa, sb))
        parts.append(f"<div class='compare-row' id='compare-sample-{row.sample}' style='margin:8px 0;"
                     f"border-top:1px solid #e5e7eb'><b>#{row.sample}</b> · {html.escape(verdict)}"
                     f"<div style='display:flex;gap:12px'>{''.join(cells)}</div>{diff}</div>")
    return "\n".join(parts)


def seed_overlaps(runs: Sequence[Run]) -> list[dict[str, int]]:
    """Every pair of runs (positions a < b in ``runs``) with shared child seeds, as
    {"a": a, "b": b, "shared": count}.

    ``shared`` is how many samples of one run can be paired, one to one, with a sample of the other
    that has the same seed (per seed, the smaller of its two counts): two same-seed runs of n
    samples with one seed share n. Samples with no recorded seed match nothing. A replay and the
    run it plays are one sampling shown twice, not two that depend on each other: never a pair.
    """
    seeds = [Counter(s.seed for s in run.samples if s.seed is not None) for run in runs]
    ids = [run.request.get("request_id") for run in runs]
    overlaps = []
    for a in range(len(runs)):
        for b in range(a + 1, len(runs)):
            if {replayed_from(runs[b]), replayed_from(runs[a])} & {ids[a], ids[b]} - {None}:
                continue
            shared = sum((seeds[a] & seeds[b]).values())
            if shared:
                overlaps.append({"a": a, "b": b, "shared": shared})
    return overlaps


def seed_overlap_sentence(overlap: dict[str, int], names: Sequence[str] | None = None) -> str:
    """One line for people; runs are numbered from 1 unless ``names`` (by position) says otherwise."""
    a, b, shared = overlap["a"], overlap["b"], overlap["shared"]
    both = f"{names[a]} and {names[b]}" if names else f"runs {a + 1} and {b + 1}"
    seeds = "child seed" if shared == 1 else "child seeds"
    return f"{both} share {shared} {seeds}: their samples are not independent"
