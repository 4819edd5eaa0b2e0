"""Runs side by side: each run in one row, the samples of run A against those of run B (sample i
against sample i, or the samples that share a seed against each other), and the runs whose samples
share seeds.

With the same base seed, sample i has the same seed in both runs, so the first token where they
part is the first token the difference between the runs (a setting, the mode, the batch they
shared) changed. Comparisons are over token ids, like every other in the playground.

Runs that share child seeds are not independent sets of samples. Sample i of a run is seeded
seed + i, so two runs whose base seeds are close draw some of the same samples: runs with seeds 42
and 43 at n = 8 share seeds 43..49, seven of their eight samples. Pooling such runs, or comparing
them as if independent, counts those samples twice. Compared sample i against sample i, such runs
pair none of those: A's sample 1 (seed 43) and B's sample 0 (seed 43) are one draw, never side by
side. ``pair_frame(a, b, by="seed")`` pairs them, and ``seed_statement`` says, in one place for the
Compare tab and the report, which samples share a seed and what that makes of the pairs.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import pandas as pd

from playground.analysis.answers import cut_short
from playground.analysis.diff import (
    common_prefix,
    diff_html,
    diff_legend,
    diff_samples,
    first_divergence,
    identical_groups,
    identical_label,
    similarity,
)
from playground.analysis.display import token_at
from playground.analysis.replays import origin_label, replayed_from, sampled_by
from playground.analysis.reproduce import why_different
from playground.analysis.sweep_views import Measures, all_measures, first_words, in_words, measures_for_people
from playground.request import SETTINGS, TOKEN_SETTINGS
from playground.run import Run, Sample

# Settings worth naming when they differ between two runs (the rest is the record's plumbing).
PAIR_COLUMNS = ["sample_a", "sample_b", "seed_a", "seed_b", "tokens_a", "tokens_b", "first_divergence", "token_a",
                "token_b", "pair_similarity", "verdict"]
PAIR_BY = ("index", "seed")  # how pair_frame pairs the samples of A and B
PairBy = Literal["index", "seed"]
PAIRS_HEADING = {"index": "Sample i of A against sample i of B", "seed": "The samples of A and B that share a seed"}
SHOWN_PAIRS = 3  # seed-sharing pairs named in a sentence before "… (k pairs)"
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


def seed_pairs(a: Run, b: Run) -> list[tuple[int, int]]:
    """The samples of A and B with the same seed, one to one, as (A's index, B's index), by seed
    then A's index. Per seed, a sample of A goes with B's of the same index when B's has that seed
    too, the rest in index order (same-seed runs: A#0 with B#0, …); a seed A has k times and B
    m times pairs min(k, m) samples, as ``seed_overlaps`` counts them. No recorded seed: no pair."""
    seeds_a: dict[int, list[int]] = {}
    seeds_b: dict[int, list[int]] = {}
    for run, seeds in ((a, seeds_a), (b, seeds_b)):
        for s in run.samples:
            if s.seed is not None:
                seeds.setdefault(s.seed, []).append(s.index)
    pairs = []
    for seed in sorted(seeds_a.keys() & seeds_b.keys()):
        in_a, in_b = seeds_a[seed], seeds_b[seed]
        both = set(in_a) & set(in_b)
        pairs += sorted([(i, i) for i in both]
                        + list(zip([i for i in in_a if i not in both], [j for j in in_b if j not in both])))
    return pairs


def _pairing(a: Run, b: Run, by: PairBy) -> list[tuple[Sample | None, Sample | None]]:
    """The pairs ``pair_frame`` compares: by index, sample i with sample i (one the other run has
    no sample of that index for alone); by seed, ``seed_pairs`` and then the samples of A, then of
    B, that share no seed with the other run, each alone."""
    a_by, b_by = {s.index: s for s in a.samples}, {s.index: s for s in b.samples}
    if by == "index":
        return [(a_by.get(i), b_by.get(i)) for i in sorted(set(a_by) | set(b_by))]
    if by != "seed":
        raise ValueError(f"samples are paired by {' or '.join(PAIR_BY)}, not {by!r}")
    paired = seed_pairs(a, b)
    taken_a, taken_b = {i for i, _ in paired}, {j for _, j in paired}
    return ([(a_by[i], b_by[j]) for i, j in paired] + [(s, None) for s in a.samples if s.index not in taken_a]
            + [(None, s) for s in b.samples if s.index not in taken_b])


def pair_frame(a: Run, b: Run, by: PairBy = "index") -> pd.DataFrame:
    """One row per pair of samples: by index (the default), A's sample i with B's sample i; by
    seed, the samples that share a seed (``seed_pairs``), then those that share none, alone. Each
    row: both samples' indices and seeds, their lengths, where they first differ (empty when
    identical) and the token each has there, the similarity, and a verdict ("only in run A" for a
    sample with no partner)."""
    rows = []
    for sa, sb in _pairing(a, b, by):
        if sa is None or sb is None:
            only = "A" if sb is None else "B"
            rows.append({"sample_a": sa.index if sa else None, "sample_b": sb.index if sb else None,
                         "seed_a": sa.seed if sa else None, "seed_b": sb.seed if sb else None,
                         "tokens_a": len(sa.token_ids) if sa else None, "tokens_b": len(sb.token_ids) if sb else None,
                         "verdict": f"only in run {only}"})
            continue
        where = first_divergence(sa.token_ids, sb.token_ids)
        verdict = "identical" if where is None else f"diverged at token {where}"
        if where is not None and _drew_alike(sa, sb):  # one was stopped where the other went on alike
            stopped = "A" if len(sa.token_ids) < len(sb.token_ids) else "B"
            where, verdict = None, f"identical as far as {stopped} went (stopped)"
        rows.append({
            "sample_a": sa.index, "sample_b": sb.index, "seed_a": sa.seed, "seed_b": sb.seed,
            "tokens_a": len(sa.token_ids), "tokens_b": len(sb.token_ids), "first_divergence": where,
            "token_a": None if where is None else token_at(sa, where),
            "token_b": None if where is None else token_at(sb, where),
            "pair_similarity": similarity(sa.token_ids, sb.token_ids),
            "verdict": verdict,
        })
    frame = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    return frame.astype({"sample_a": "Int64", "sample_b": "Int64", "first_divergence": "Int64", "seed_a": "Int64",
                         "seed_b": "Int64", "tokens_a": "Int64", "tokens_b": "Int64"})


def _indices(indices: Sequence[int]) -> str:
    """Sample indices for people: "#0", "#0 and #3", "#0–#7", "#0, #2–#4 and #6"."""
    spans: list[list[int]] = []
    for i in sorted(indices):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    said = [f"#{lo}" if lo == hi else f"#{lo}, #{hi}" if hi == lo + 1 else f"#{lo}–#{hi}" for lo, hi in spans]
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"


def identical_pairs(frame: pd.DataFrame, by: PairBy = "index") -> str:
    """How many of ``pair_frame``'s pairs are identical, as a headline says it: out of the pairs,
    and which samples have no partner (of the same index, or of the same seed: ``by``). A pair
    with a stopped sample that went as far alike counts, and the headline says how many did."""
    alone_a = [int(i) for i in frame.loc[frame["sample_b"].isna(), "sample_a"].dropna()]
    alone_b = [int(i) for i in frame.loc[frame["sample_a"].isna(), "sample_b"].dropna()]
    alike = frame["verdict"].fillna("").str.startswith("identical")
    same, pairs = int(alike.sum()), len(frame) - len(alone_a) - len(alone_b)
    so_far = int((alike & (frame["verdict"] != "identical")).sum())
    identical = ("identical" if not so_far else "identical as far as the stopped run went" if so_far == same
                 else f"identical ({so_far} as far as the stopped run went)")
    if by == "seed":
        said = f"{same} of {pairs} same-seed pairs {identical}" if pairs else "No pair of samples shares a seed"
        alone = [f"run {name}'s {_indices(ids)}" for name, ids in (("A", alone_a), ("B", alone_b)) if ids]
        if not alone:
            return said
        have = "has" if len(alone_a) + len(alone_b) == 1 else "have"
        # a seed the other run drew too, but fewer times (same-seed mode): its samples are paired already
        alone_seeds = {side: set(frame.loc[frame[f"sample_{other}"].isna(), f"seed_{side}"].dropna())
                       for side, other in (("a", "b"), ("b", "a"))}
        paired_already = (alone_seeds["b"] & set(frame["seed_a"].dropna())
                          or alone_seeds["a"] & set(frame["seed_b"].dropna()))
        left = " left (a sample pairs with one of the other run, once)" if paired_already else ""
        return f"{said} ({' and '.join(alone)} {have} no partner of the same seed{left})"
    if not alone_a and not alone_b:
        return f"{same} of {pairs} samples {identical}"
    wider, alone = ("A", alone_a) if alone_a else ("B", alone_b)
    return (f"{same} of {pairs} sample pairs {identical} ({len(alone)} of run {wider}'s samples have no "
            "partner of the same index)")


def _independent(index: int, seed_a: int, seed_b: int) -> str:
    return (f"No pair shares its seed (A's sample {index} has seed {seed_a}, B's {seed_b}): each pair is two "
            "independent draws, so where they part says nothing of the settings; the figures side by side compare "
            "the two sets.")


def _named_pairs(pairs: Sequence[tuple[int, int]], seed_of: dict[int, int]) -> str:
    """ "A#1 and B#0 share seed 2, A#2 and B#1 seed 3, A#3 and B#2 seed 4, … (7 pairs)". """
    said = [f"A#{i} and B#{j} {'share ' if k == 0 else ''}seed {seed_of[i]}" for k, (i, j) in enumerate(pairs)]
    if len(said) == 1:
        return said[0]
    shown = said if len(said) <= SHOWN_PAIRS + 1 else [*said[:SHOWN_PAIRS], "…"]
    return f"{', '.join(shown)} ({len(pairs)} pairs)"


def seed_statement(a: Run, b: Run, by: PairBy = "index") -> str | None:
    """What the seeds make of the pairs ``pair_frame(a, b, by)`` shows, in one statement: the Compare
    tab's headline and the comparison report say it alike, so that what one sentence says of the
    pairs and another of the runs cannot contradict each other. None when there is nothing to say
    (no seed known; a replay and the run it plays, one sampling shown twice: ``seed_overlaps``).

    - No seed shared: each pair is two independent draws.
    - Shared at the same index only: when every pair shares its seed (the same base seed), where a
      pair parts is what the difference between the runs changed (a note, not a warning: the
      reproducibility demo); else the runs share k child seeds, their samples are not independent.
    - Shared at other indices (base seeds closer than n), by index: which samples share a seed
      ("A#1 and B#0 share seed 2, …"), that the pairs by index (those that do not) are independent
      draws, and that pairing by seed sets the same-seed samples side by side.
    - By seed: the runs share k child seeds, the pairs named; the unpaired are named by
      ``identical_pairs``.
    """
    if not any(s.seed is not None for s in a.samples) or not any(s.seed is not None for s in b.samples):
        return ("A sample with no recorded seed has no partner by seed: pair the samples by index."
                if by == "seed" else None)
    paired = seed_pairs(a, b)
    a_by, b_by = {s.index: s for s in a.samples}, {s.index: s for s in b.samples}
    by_index = [i for i in sorted(a_by.keys() & b_by.keys()) if a_by[i].seed is not None and b_by[i].seed is not None]
    if not paired:
        if by == "seed":
            return ("No sample of A shares its seed with one of B: there is no pair by seed, each run's samples are "
                    "independent draws of their own, and the figures side by side compare the two sets.")
        return _independent(by_index[0], a_by[by_index[0]].seed, b_by[by_index[0]].seed) if by_index else None
    if not seed_overlaps([a, b]):  # a replay and its run: one sampling, every pair shares its seed
        return None
    seed_of = {i: a_by[i].seed for i, _ in paired}
    shared = f"⚠️ {seed_overlap_sentence({'a': 0, 'b': 1, 'shared': len(paired)}, ['A', 'B'])}"
    if by == "seed":
        return (f"{shared}. Paired by seed: {_named_pairs(paired, seed_of)}; where such a pair parts is what the "
                "difference between the runs changed.")
    across = [(i, j) for i, j in paired if i != j]
    same, pairs = len(paired) - len(across), len(a_by.keys() & b_by.keys())
    some = f"{same} of the {pairs} pairs below {'shares its' if same == 1 else 'share their'} seed"
    if not across and same == pairs:  # the same base seed: the reproducibility demo, or one change's effect
        return (f"ℹ️ Every pair below shares its seed (A and B share {len(paired)} child seed"
                f"{'s' if len(paired) != 1 else ''}): where a pair parts is what the difference between the runs "
                "changed, and where none does, the same seeds gave the same samples. Their samples are not "
                "independent: the figures side by side compare one draw of the seeds, not two.")
    if not across:
        return f"{shared}; {some}, so where such a pair parts is what the difference between the runs changed."
    named, by_seed = _named_pairs(across, seed_of), "Pair the samples by seed to set those that share one side by side."
    if same:
        return f"{shared}. {some}; at different indices, {named}. {by_seed}"
    first = f" (A#{by_index[0]} has seed {a_by[by_index[0]].seed}, B#{by_index[0]} seed {b_by[by_index[0]].seed})" \
        if by_index else ""
    return (f"{shared}. At different indices, {named}; compared by index, no pair below shares its seed{first}, so "
            f"where a pair parts says nothing of the settings. {by_seed}")


def conditions_statement(a: Run, b: Run) -> str | None:
    """Why samples of the same seed parted when A and B asked for the same tokens (the prompt, the
    branch point and every setting that decides them alike): what the two records say differed
    (``why_different``: the batch, the engine, its load), so that the difference is not read as
    seeded sampling failing to repeat. None when no such pair parted, or a setting explains it."""
    asked = lambda run: [run.request.get(k) for k in ("prompt_token_ids", "prefix_token_ids", *TOKEN_SETTINGS)]  # noqa: E731
    if asked(a) != asked(b):
        return None
    a_by, b_by = {s.index: s for s in a.samples}, {s.index: s for s in b.samples}
    paired = seed_pairs(a, b)
    parted = sum(not _drew_alike(a_by[i], b_by[j]) for i, j in paired)  # a stopped sample went as far as alike
    if not parted:
        return None
    said = (f"⚠️ {parted} of the {len(paired)} pairs of samples that share a seed parted, though A and B asked for "
            "the same tokens: seeded sampling repeats only under the same conditions")
    reasons = why_different(a, b)
    if not reasons:
        return f"{said}, and neither record names one that differed."
    return f"{said}, and these differed: {'; '.join(reasons)}."


def measures_side_by_side(a: Run, b: Run, measures: Measures | None = None) -> pd.DataFrame:
    """One row per measure, named in words (``in_words``): A's value, B's value, and B - A where
    both are numbers (a majority that did not settle says "not within n": ``measures_for_people``)."""
    ma = measures_for_people(all_measures(a, measures), a.n)
    mb = measures_for_people(all_measures(b, measures), b.n)
    rows = []
    for name in list(dict.fromkeys([*ma, *mb])):
        va, vb = ma.get(name), mb.get(name)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (va, vb))
        rows.append({"figure": in_words(name), "A": va, "B": vb, "B - A": vb - va if numbers else None})
    return pd.DataFrame(rows, columns=["figure", "A", "B", "B - A"])


def comparison_html(a: Run, b: Run, words: int = 40, frame: pd.DataFrame | None = None,
                    by: PairBy = "index") -> str:
    """Both runs' columns, pair by pair (``by`` index or seed, as ``pair_frame``): each pair's
    verdict, and B's sample token by token against A's (inserted and replaced tokens highlighted).
    ``frame``: ``pair_frame(a, b, by)`` when the caller has it (it diffs every pair)."""
    a_by, b_by = {s.index: s for s in a.samples}, {s.index: s for s in b.samples}
    frame = pair_frame(a, b, by) if frame is None else frame
    of = "of the same index" if by == "index" else "that shares its seed"
    parts = [(f"<p class='compare-headline'><b>{html.escape(identical_pairs(frame, by))}</b> between run A "
              f"(<code>{html.escape(run_label(a))}</code>) and run B (<code>{html.escape(run_label(b))}</code>); "
              f"below, B's sample token by token against A's sample {of} ({diff_legend()} marked).</p>")]
    for row in frame.itertuples():
        i, j = (None if pd.isna(k) else int(k) for k in (row.sample_a, row.sample_b))
        sa, sb = a_by.get(i), b_by.get(j)
        verdict = row.verdict if pd.isna(row.first_divergence) else (
            f"{row.verdict}: A has “{row.token_a}”, B has “{row.token_b}”")
        cells = []
        for name, sample in (("A", sa), ("B", sb)):
            text = "—" if sample is None else html.escape(first_words(sample, words))
            seed = "" if sample is None else f" · seed {sample.seed}"
            cells.append(f"<div class='compare-cell' style='flex:1;min-width:0'><b>{name}</b>{seed}<br>{text}</div>")
        diff = ""
        if sa is not None and sb is not None:
            diff = ("<div style='font-size:12px;opacity:0.8;margin-top:4px'>B against A, token by token:</div>"
                    + diff_html(diff_samples(sa, sb)))  # the strip is B's: said, it spans both columns
        if by == "index":
            anchor, title = f"compare-sample-{i if i is not None else j}", f"#{i if i is not None else j}"
        else:
            named = [(name, k) for name, k in (("A", i), ("B", j)) if k is not None]
            anchor = "compare-pair-" + "-".join(f"{name.lower()}{k}" for name, k in named)  # compare-pair-a1-b0
            title = " · ".join(f"{name}#{k}" for name, k in named)
        parts.append(f"<div class='compare-row' id='{anchor}' style='margin:8px 0;"
                     f"border-top:1px solid #e5e7eb'><b>{title}</b> · {html.escape(verdict)}"
                     f"<div style='display:flex;gap:12px'>{''.join(cells)}</div>{diff}</div>")
    return "\n".join(parts)


def seed_overlaps(runs: Sequence[Run]) -> list[dict[str, int]]:
    """Every pair of runs (positions a < b in ``runs``) with shared child seeds, as
    {"a": a, "b": b, "shared": count}.

    ``shared`` is how many samples of one run can be paired, one to one, with a sample of the other
    that has the same seed (per seed, the smaller of its two counts): two same-seed runs of n
    samples with one seed share n. Samples with no recorded seed match nothing. A replay and the
    run it plays, or two replays of one run, are one sampling shown twice, not two that depend on
    each other: never a pair.
    """
    seeds = [Counter(s.seed for s in run.samples if s.seed is not None) for run in runs]
    # the sampling each run shows: a replay's is the run it plays
    sampling = [sampled_by(run) or run.request.get("request_id") for run in runs]
    overlaps = []
    for a in range(len(runs)):
        for b in range(a + 1, len(runs)):
            if sampling[a] is not None and sampling[a] == sampling[b]:
                continue
            shared = sum((seeds[a] & seeds[b]).values())
            if shared:
                overlaps.append({"a": a, "b": b, "shared": shared})
    return overlaps


def _drew_alike(a: Sample, b: Sample | None) -> bool:
    """Two samples of one seed drew the same tokens: all of them, or as far as one cut short went."""
    if b is None:
        return False
    if a.token_ids == b.token_ids:
        return True
    short, long = (a, b) if len(a.token_ids) < len(b.token_ids) else (b, a)
    return cut_short(short) and list(long.token_ids[:len(short.token_ids)]) == list(short.token_ids)


def seed_reuse_sentence(run: Run, earlier: Sequence[Run]) -> str:
    """What a run shown says of its seeds when a run of the same prompt that started before it drew
    with some of them (``earlier``: the session's other runs). One with the very same child seeds,
    sample for sample, comes first: the reproducibility check, said with its outcome (how many
    samples came out identical). Else the latest that shares some: seeds closer than n are draws a
    person takes for new that are not (child i gets seed + i: seed 2 after seed 1 repeats seven of
    eight). "" when none did, and for a run that repeats seeds on purpose (same-seed mode, a rerun
    of the Reproducibility tab) or against one."""
    def prompt_of(r: Run):
        return r.request.get("rendered_prompt") or r.request.get("prompt")

    def on_purpose(r: Run) -> bool:  # a replay samples nothing: its tokens are its run's, copied
        return r.request.get("mode") == "same-seed" or bool(r.request.get("rerun")) or bool(replayed_from(r))

    if on_purpose(run):
        return ""
    rid, n = run.request.get("request_id"), len(run.samples)
    # each earlier run that shares seeds (not a replay of it: ``seed_overlaps``), with its pairs, oldest first
    others = sorted(((o, seed_pairs(run, o)) for o in earlier
                     if o.request.get("request_id") != rid and prompt_of(o) == prompt_of(run) and not on_purpose(o)
                     and o.started_at <= run.started_at and seed_overlaps([o, run])),
                    key=lambda found: found[0].started_at)
    same = [o for o, pairs in others if len(pairs) == n and all(i == j for i, j in pairs)]
    if same:
        other = same[-1]
        theirs = {sample.index: sample for sample in other.samples}
        alike = sum(_drew_alike(sample, theirs.get(sample.index)) for sample in run.samples)
        cut = any(cut_short(s) for s in (*run.samples, *other.samples))
        head = f"ℹ️ The same child seeds as `{other.request.get('request_id')}`, sample for sample"
        if alike == n:
            every = "the sample came out identical to theirs" if n == 1 else \
                f"all {n} samples came out identical to theirs"
            return (f"{head}, and {every}{' as far as the stopped samples went' if cut else ''}: the same seeds "
                    "gave the same samples.")
        return (f"{head}: {alike} of {n} samples came out identical to theirs; where one parts from its partner, "
                "something other than the seed changed (Compare says what).")
    if not others:
        return ""
    other, pairs = others[-1]
    mine, theirs = [i for i, _ in pairs], [j for _, j in pairs]
    if len({j - i for i, j in pairs}) == 1 and mine == list(range(mine[0], mine[0] + len(mine))):
        which = (f"#{mine[0]}–#{mine[-1]} here have the seeds of #{theirs[0]}–#{theirs[-1]} there" if len(mine) > 1
                 else f"#{mine[0]} here has the seed of #{theirs[0]} there")
    else:  # an uneven overlap: a few pairs named
        which = ", ".join(f"#{i} here has the seed of #{j} there" for i, j in pairs[:SHOWN_PAIRS]) + (
            ", …" if len(pairs) > SHOWN_PAIRS else "")
    seeds = sorted(sample.seed for sample in other.samples if sample.seed is not None)
    low, high = seeds[0], seeds[-1]
    fresh = f"a base seed from {high + 1} up" + (f", or {low - n} and below," if low - n >= 0 else "")
    one = len(pairs) == 1
    return (f"⚠️ {len(pairs)} of this run's {n} child seeds {'was' if one else 'were'} "
            f"`{other.request.get('request_id')}`'s too (child i gets seed + i; it drew with seeds {low}–{high}): "
            f"{which}, so {'it is not a new draw' if one else 'they are not new draws'}. {fresh[0].upper()}{fresh[1:]} "
            "gives fresh ones.")


def seed_overlap_sentence(overlap: dict[str, int], names: Sequence[str] | None = None) -> str:
    """One line for people; runs are numbered from 1 unless ``names`` (by position) says otherwise."""
    a, b, shared = overlap["a"], overlap["b"], overlap["shared"]
    both = f"{names[a]} and {names[b]}" if names else f"runs {a + 1} and {b + 1}"
    seeds = "child seed" if shared == 1 else "child seeds"
    return f"{both} share {shared} {seeds}: their samples are not independent"
