"""How the analysis shows samples to people: tokens made visible, text cut to fit, and the look
every chart shares.

Samples usually differ by one token, and that token is often whitespace: a space, a newline, or
half of a multibyte character. Every token view goes through ``visible`` so that a person can see
where one token ends and what an "invisible" token actually was.

A chart's height grows with the rows it shows (Gradio has rendered autosized plots at zero
height), a chart with nothing to draw says why, and a sample has one colour in every chart.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
import regex
from plotly.colors import qualitative

from playground.run import Run, Sample

# A token that ends inside a multibyte UTF-8 character decodes to '' (the next token carries the
# character); it still is a token and must take up room in every view.
PARTIAL = "⟨…⟩"
_MARKS = {" ": "·", "\t": "→", "\r": "␍", "\u00a0": "⍽"}
_FORMAT = regex.compile(r"\p{Cf}")  # invisible: zero-width spaces and joiners, direction marks


def visible(piece: str, multiline: bool = True) -> str:
    """``piece`` with whitespace drawn: space '·', tab '→', CR '␍', newline '↵', no-break space '⍽'.

    ``multiline`` keeps a real line break after '↵' (text views); labels and hovers want one line.
    Other control characters, and the invisible format characters (a zero-width space or joiner,
    a direction mark or override, which would also turn the text after it around), are shown as
    their code point: a token that is one of them takes room, and says so. The token wall draws
    its cells alike (``assets/samples.js``, ``visible``).
    """
    if piece == "":
        return PARTIAL
    out = []
    for ch in piece:
        if ch == "\n":
            out.append("↵\n" if multiline else "↵")
        elif ch in _MARKS:
            out.append(_MARKS[ch])
        elif ord(ch) < 32 or ord(ch) == 127 or (ord(ch) > 127 and _FORMAT.match(ch)):
            out.append(f"⟨U+{ord(ch):04X}⟩")
        else:
            out.append(ch)
    return "".join(out)


def token_name(token_id: int) -> str:
    """A token named by its id where no text says it (no space inside: views draw spaces as '·')."""
    return f"⟨id:{token_id}⟩"


def alternative(text: str | None, token_id: int) -> str:
    """A top-k token as hovers and lists name it: its text, or, when it has none or is a part of a
    character (whose text alone is U+FFFD: several at one position would read alike), its id too."""
    if text and "\ufffd" not in text:
        return text
    return f"{text or ''}{token_name(token_id)}"


def pieces(sample: Sample) -> list[str]:
    """One text piece per token id, even when the record has fewer (no decoder, or a run caught
    mid-event): the logprob's decoded token, or else the token id, fills the gap."""
    texts = list(sample.token_texts[: len(sample.token_ids)])
    for pos in range(len(texts), len(sample.token_ids)):
        lp = sample.logprobs[pos] if sample.logprobs and pos < len(sample.logprobs) else None
        texts.append(lp.text if lp is not None and lp.text else token_name(sample.token_ids[pos]))
    return texts


def joined(texts: list[str], sep: str = "│") -> str:
    """Pieces on one line with their boundaries marked, for hovers and table cells."""
    return sep.join(visible(t, multiline=False) for t in texts)


def token_at(sample: Sample, position: int, quoted: bool = False) -> str:
    """The visible token at ``position`` on one line (``quoted``: in “ ”), or "(end)" past the
    sample's last token: where two samples part, one may simply have stopped."""
    texts = pieces(sample)
    if position >= len(texts):
        return "(end)"
    token = visible(texts[position], multiline=False)
    return f"“{token}”" if quoted else token


def counted(count: int, word: str, words: str | None = None) -> str:
    """"1 token", "3 tokens": a count and its noun, as a sentence says it (``words``: an irregular
    plural)."""
    return f"{count} {word if count == 1 else words or word + 's'}"


def first_tokens(k: int) -> str:
    """"first token", "first 3 tokens": the start samples share, as a sentence says it."""
    return "first token" if k == 1 else f"first {k} tokens"


def percent(share: float) -> str:
    """A share as a person reads it: 50%, 12.5% (one of eight, not "12%"), 33.3%."""
    return f"{share:.1%}".replace(".0%", "%")


def continued_text(run: Run) -> str:
    """The words a branch's samples continue after the prompt (its record's ``branch.prefix_text``:
    the parent's words before the point, then the forced token); "" for a run that is no branch."""
    branch = run.request.get("branch")
    return (branch.get("prefix_text") or "") if isinstance(branch, dict) else ""


def truth_word(value) -> str | None:
    """"yes" or "no" for a truth value (Python's or numpy's), as a table for people says it; None
    for anything else: by type, not equality, since 1 == True and a count of 1 is no "yes"."""
    return ("yes" if value else "no") if isinstance(value, bool | np.bool_) else None


def model_name(model) -> str:
    """A model as a line names it: a hub id or a folder by its last part ("SmolLM2-135M-Instruct")."""
    return str(model).rstrip("/").rsplit("/", 1)[-1]


_GRAPHEME = regex.compile(r"\X")  # what a reader sees as one character: a letter and its marks, a flag, a family


def truncate(text: str, width: int) -> str:
    """``text`` in at most ``width`` code points, cut at a whole character as a reader sees one
    (never half a flag, an emoji family without its last member, or a letter without its accent)."""
    if len(text) <= width:
        return text
    end = 0
    for grapheme in _GRAPHEME.finditer(text):  # lazily: it stops at the cut
        if grapheme.end() > width - 1:
            break
        end = grapheme.end()
    return text[:end] + "…"


def for_hover(text: str) -> str:
    """Plotly labels read a little HTML: escape it, and keep line breaks as <br>. Quotes stay as
    they are: plotly shows ``&quot;`` as it is written."""
    return html.escape(text, quote=False).replace("\n", "<br>")


def height_for(rows: int, per_row: int = 26, minimum: int = 320, maximum: int = 960) -> int:
    return max(minimum, min(maximum, 120 + per_row * rows))


def message_figure(title: str, message: str, height: int = 320) -> go.Figure:
    """A figure with no data that says why (no logprobs recorded, no tokens yet)."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title=title, height=height, xaxis_visible=False, yaxis_visible=False)
    return fig


MAX_SAMPLE_LINES = 32  # per-sample lines a figure draws: beyond, a line per sample is a blur and a slow page


def drawn_samples(run: Run, names: str = "lines") -> tuple[list, str]:
    """The samples a figure draws one line each for (the first ``MAX_SAMPLE_LINES`` by index), and
    a note for its title when that is not all of them."""
    if run.n <= MAX_SAMPLE_LINES:
        return list(run.samples), ""
    return list(run.samples[:MAX_SAMPLE_LINES]), f" ({names} of samples 0–{MAX_SAMPLE_LINES - 1} of {run.n})"


def sample_color(index: int) -> str:
    """One colour per sample index, the same in every figure (Dark24 has 24, larger n repeats; its
    first ones are far apart, where Alphabet gave samples 0 and 3 two purples)."""
    palette = qualitative.Dark24
    return palette[index % len(palette)]
