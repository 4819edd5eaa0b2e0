"""Two runs side by side: sample i of run A against sample i of run B.

With the same base seed, sample i has the same seed in both runs, so the first token where they
part is the first token the difference between the runs (a setting, the mode, the batch they
shared) changed. Comparisons are over token ids, like every other in the playground.
"""

from __future__ import annotations

import html

import pandas as pd

from playground.analysis.diff import diff_html, diff_samples, first_divergence, similarity
from playground.analysis.sweep_views import Measures, all_measures, first_words
from playground.analysis.tokens import token_at
from playground.run import Run

# Settings worth naming when they differ between two runs (the rest is the record's plumbing).
SETTINGS = ("prompt", "use_chat_template", "n", "seed", "mode", "output_kind", "temperature", "top_p", "top_k",
            "min_p", "max_tokens", "presence_penalty", "frequency_penalty", "repetition_penalty", "stop",
            "logprobs", "ignore_eos")
PAIR_COLUMNS = ["sample", "seed_a", "seed_b", "tokens_a", "tokens_b", "first_divergence", "token_a", "token_b",
                "similarity", "verdict"]


def run_label(run: Run) -> str:
    return str(run.request.get("request_id", "run"))


def settings_diff(a: Run, b: Run) -> pd.DataFrame:
    """The settings that differ between the two runs' requests: the likely cause of what differs."""
    rows = [{"setting": k, "A": a.request.get(k), "B": b.request.get(k)}
            for k in SETTINGS if a.request.get(k) != b.request.get(k)]
    if a.engine.get("model") != b.engine.get("model"):
        rows.append({"setting": "model", "A": a.engine.get("model"), "B": b.engine.get("model")})
    return pd.DataFrame(rows, columns=["setting", "A", "B"])


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


def measures_side_by_side(a: Run, b: Run, measures: Measures | None = None) -> pd.DataFrame:
    """One row per measure: A's value, B's value, and B - A where both are numbers."""
    ma, mb = all_measures(a, measures), all_measures(b, measures)
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
    same = int((frame["verdict"] == "identical").sum())
    parts = [(f"<p class='compare-headline'><b>{same} of {len(frame)} samples identical</b> between run A "
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
