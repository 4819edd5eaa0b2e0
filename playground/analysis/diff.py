"""Where samples stop agreeing, measured on token ids.

Texts can look alike while token ids differ (" the" vs " th"+"e"), and a seed replay is only
reproduced if the ids match, so every comparison here is over ids; text is only for display.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from difflib import SequenceMatcher
from itertools import takewhile

import numpy as np
import plotly.graph_objects as go
from rapidfuzz import process
from rapidfuzz.distance import Indel

from playground.analysis.display import first_tokens, height_for, message_figure, pieces, visible
from playground.run import Run, Sample

# Labels of diff_samples, and colours that fit gr.HighlightedText(color_map=DIFF_COLORS).
DIFF_COLORS = {"equal": "#e5e7eb", "insert": "#bbf7d0", "replace": "#fde68a", "delete": "#fecaca"}


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """First position where ``a`` and ``b`` differ; None when identical.

    When one is a prefix of the other, they diverge where the shorter one ends.
    """
    for pos, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return pos
    return None if len(a) == len(b) else min(len(a), len(b))


def similarity_matrix(samples: Sequence[Sequence[int]]) -> np.ndarray:
    """n x n normalised Indel similarity of token ids, 2·LCS/(|a|+|b|); two empty samples: 1.0."""
    if not samples:
        return np.zeros((0, 0))
    lists = [list(tokens) for tokens in samples]
    # every core: at n=256 x 1,000 tokens the matrix is a second of one, at the end of every such run
    return process.cdist(lists, lists, scorer=Indel.normalized_similarity, dtype=np.float64, workers=-1)


def similarity(a: Sequence[int], b: Sequence[int]) -> float:
    """The set measures' similarity of two token sequences, 2·LCS/(|a|+|b|) (1.0 for two empty
    samples): one definition for the diff, the heatmap, comparisons and the set's diversity."""
    return float(similarity_matrix([a, b])[0, 1])


def first_divergences(samples: Sequence[Sequence[int]]) -> np.ndarray:
    """n x n first divergence positions (-1 where two samples are identical), computed a row at a
    time over the padded token matrix: at n=256 that is 256 array comparisons, not 32,640 loops."""
    n = len(samples)
    lengths = np.array([len(s) for s in samples])
    width = int(lengths.max(initial=0)) + 1
    ids = np.full((n, width), -1, dtype=np.int64)  # -1 past a sample's end: differs from any token
    for row, tokens in enumerate(samples):
        ids[row, :len(tokens)] = tokens
    out = np.empty((n, n), dtype=np.int64)
    for row in range(n):
        differ = ids != ids[row]
        first = np.where(differ.any(axis=1), differ.argmax(axis=1), -1)
        out[row] = first
    return out


def common_prefix(run: Run) -> int:
    """How many leading tokens all n samples share."""
    return _shared_start([s.token_ids for s in run.samples])


def _shared_start(token_lists: list[list[int]]) -> int:
    columns = zip(*token_lists)
    return sum(1 for _ in takewhile(lambda col: len(set(col)) == 1, columns)) if token_lists else 0


def shared_prefix_sentence(run: Run) -> str:
    """How far the samples agree, as the Diff view and the report say it (in words that fit one
    sample, identical samples and samples that part at once, not "All 1 samples share ...")."""
    silent = [s for s in run.samples if not s.token_ids]
    if silent and len(run.samples) > 1:  # a run stopped or failed early: said, not read as a divergence
        n, rest = len(run.samples), [s for s in run.samples if s.token_ids]
        head = f"{len(silent)} of the {n} samples {'has' if len(silent) == 1 else 'have'} no tokens."
        if not rest:
            return f"None of the {n} samples has a token."
        if len(rest) == 1:
            count = len(rest[0].token_ids)
            return f"{head} The other has {count} token{'' if count == 1 else 's'}."
        k = _shared_start([s.token_ids for s in rest])
        if k:
            return f"{head} The other {len(rest)} share their {first_tokens(k)}."
        return f"{head} The other {len(rest)} {_no_beginning(len(rest))}"
    k = common_prefix(run)
    if len(run.samples) == 1:
        count = len(run.samples[0].token_ids)
        return f"One sample, of {count} token{'' if count == 1 else 's'}."
    if k == 0:
        return f"The {len(run.samples)} samples {_no_beginning(len(run.samples))}"
    if all(len(s.token_ids) == k for s in run.samples):
        return f"All {len(run.samples)} samples are identical ({k} token{'' if k == 1 else 's'})."
    return f"All {len(run.samples)} samples share their {first_tokens(k)}."


def _no_beginning(n: int) -> str:
    """That n samples share no first token, in words that do not say no two of them do (30 of 32
    may begin alike)."""
    return ("differ from their first token." if n == 2 else
            "share no beginning: not all of them start with the same token.")


def identical_groups(run: Run) -> list[list[int]]:
    """Groups of two or more samples with exactly the same token ids (so far, if still running)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for s in run.samples:
        groups.setdefault(tuple(s.token_ids), []).append(s.index)
    return [g for g in groups.values() if len(g) > 1]


def identical_label(groups: list[list[int]]) -> str:
    """identical_groups as tables show them, like '0=2; 1=3', or 'none' (run_row and sweep_table
    write it alike; a blank cell read as a figure that was not computed)."""
    return "; ".join("=".join(map(str, g)) for g in groups) or "none"


def diff_samples(ref: Sample, sample: Sample, deleted: bool = False) -> list[tuple[str, str]]:
    """``sample`` token by token against ``ref``, as (visible text, label); the two may come from
    different runs (a comparison diffs run B's sample i against run A's).

    Labels: 'equal', 'insert' (not in the reference), 'replace' (stands where the reference has
    other tokens). Every label is a string, so equal tokens get a colour too: use
    ``gr.HighlightedText(color_map=DIFF_COLORS, combine_adjacent=False)`` to keep token
    boundaries. With ``deleted=True`` the reference's missing tokens are shown as 'delete'.
    """
    ref_pieces, sample_pieces = pieces(ref), pieces(sample)
    matcher = SequenceMatcher(None, ref.token_ids, sample.token_ids, autojunk=False)
    out = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if deleted and tag in ("delete", "replace"):
            out += [(visible(p), "delete") for p in ref_pieces[i1:i2]]
        out += [(visible(p), tag) for p in sample_pieces[j1:j2]]  # 'delete' has no sample tokens
    return out


# Borders tell the labels apart without their colours: inserted solid, replaced dashed, deleted struck.
DIFF_BORDERS = {"insert": "2px solid #15803d", "replace": "2px dashed #b45309"}


def _token_style(label: str) -> str:
    style = (f"background:{DIFF_COLORS.get(label, '#ffffff')};border:{DIFF_BORDERS.get(label, '1px solid #9ca3af')};"
             "border-radius:2px;margin:0 1px")
    return style + (";text-decoration:line-through" if label == "delete" else "")


def diff_legend() -> str:
    """The diff's key, drawn as its tokens are: "inserted and replaced tokens", each in its style."""
    return (f'<span class="tok tok-insert" style="{_token_style("insert")}">inserted</span> and '
            f'<span class="tok tok-replace" style="{_token_style("replace")}">replaced</span> tokens')


def diff_html(pairs: list[tuple[str, str | None]], sample: int | None = None) -> str:
    """diff_samples' pairs as escaped HTML: one boxed span per token, coloured by label. With
    ``sample`` each of the sample's own tokens says where it is (``data-s``, ``data-p``: its
    position), so a page can branch from the token clicked."""
    spans, position = [], 0
    for text, label in pairs:
        label = label or "equal"
        style = _token_style(label)
        where = ""
        if label != "delete" and sample is not None:
            where = f' data-s="{sample}" data-p="{position}"'
            position += 1
        spans.append(f'<span class="tok tok-{html.escape(label)}" title="{html.escape(label)}"{where} '
                     f'style="{style}">{html.escape(text)}</span>')
    # anywhere: the tokens show their spaces as "·", so a row has no place of its own to wrap at
    return ('<div class="token-diff" style="font-family:monospace;white-space:pre-wrap;overflow-wrap:anywhere;'
            'line-height:1.8">' + "".join(spans) + "</div>")


def diff_rows(run: Run, reference: int, anchored: bool = False, with_similarity: bool = False,
              only: Sequence[int] | None = None) -> list[str]:
    """One HTML row per sample (``only`` these, by index) against sample ``reference``: '#i ·
    seed s · the reference / identical / diverges at token k' and its tokens. The Diff tab and the
    HTML report show the same rows; the tab anchors each (``id='diff-sample-i'``), adds the
    similarity and makes each token say where it is (to branch from it)."""
    ref = run.samples[reference]
    rows = []
    for s in run.samples if only is None else [run.samples[i] for i in only]:
        where = first_divergence(ref.token_ids, s.token_ids)
        said = ("the reference" if s.index == reference else
                "identical" if where is None else f"diverges at token {where}")
        anchor = f" id='diff-sample-{s.index}'" if anchored else ""
        alike = f" · similarity {similarity(ref.token_ids, s.token_ids):.2f}" if with_similarity else ""
        rows.append(f"<div class='diff-row'{anchor}><b>#{s.index}</b> · seed {s.seed} · {html.escape(said)}{alike}"
                    f"{diff_html(diff_samples(ref, s), s.index if anchored else None)}</div>")
    return rows


MAX_HEATMAP = 256  # samples in the pairwise heatmap


def pairwise_heatmap(run: Run) -> go.Figure:
    """Similarity of every pair of samples; each cell is labelled with the first divergence
    position ('=' for identical samples). Of a run of more than ``MAX_HEATMAP`` samples, the first
    ``MAX_HEATMAP``: the matrix grows with n squared (19 MB of figure at n=1024), and a page that
    takes that stops painting."""
    if len(run.samples) < 2:
        return message_figure("Pairwise similarity", "one sample: there is no pair to compare")
    shown = run.samples[:MAX_HEATMAP]
    names = [f"sample {s.index}" for s in shown]
    n = len(names)
    tokens = [s.token_ids for s in shown]
    z, first = similarity_matrix(tokens), first_divergences(tokens)
    np.fill_diagonal(z, 1.0)
    labelled = n <= 16  # cell text is drawn only this small; beyond, it is the hover's
    text = np.where(first < 0, "=", first.astype(str)) if labelled else None
    if labelled:
        np.fill_diagonal(text, "")
    fig = go.Figure(go.Heatmap(
        z=z.round(3), x=names, y=names, text=text, texttemplate="%{text}" if labelled else None,
        customdata=first, hovertemplate="%{y} vs %{x}<br>similarity %{z:.3f}<br>first divergence at token "
                                        "%{customdata} (-1: identical)<extra></extra>",
        zmin=0, zmax=1, colorscale="Viridis", colorbar={"title": "similarity"},
    ))
    of = f" of the first {n} samples (of {run.n})" if run.n > n else ""
    fig.update_layout(
        title=f"Pairwise similarity{of} (cell text: first divergent token position)",
        height=height_for(n, per_row=22, minimum=360), yaxis_autorange="reversed",
        # at most 24 labels an axis: measuring one per sample is most of the time to draw n=128
        xaxis_nticks=min(n, 24), yaxis_nticks=min(n, 24),
    )
    return fig
