"""What a replayed run is, for people: a replay streams a recorded run again (at its pace or
faster, ``playground.backends.replay``) and is a run of its own, whose record says which run it
plays (``request["replay"]``). Every place that shows, exports or compares a run names it so
(the summary line, History, Compare, the report, ``analyze``), so a replay is never taken for a
sampling of the engine. A run written by hand (texts alone) is named the same way."""

from __future__ import annotations

from playground.bundles import WORDS
from playground.run import Run


def replayed_from(run: Run | None) -> str | None:
    """The request id of the run ``run`` replays (None: no run, or not a replay)."""
    return (run.request.get("replay") or {}).get("of") if run is not None else None


def sampled_by(run: Run | None) -> str | None:
    """The request id of the run that sampled a replay's tokens: the run it replays, or for a
    replay of a replay the first run of the chain (None: not a replay)."""
    replay = (run.request.get("replay") or {}) if run is not None else {}
    return replay.get("sampled") or replay.get("of")


def origin_label(run: Run, why: bool = False) -> str | None:
    """What the run is when it is no sampling of an engine (None when it is one): "replay of
    run-… at x4" (``why``: with the reason the replay chose that run, when the request's settings
    differed from it), or "written by hand" for samples read from texts alone (whose words stand in
    for their tokens, ``playground.bundles.hand_made``)."""
    replay = run.request.get("replay")
    if not replay:
        return HAND_MADE if written_by_hand(run) else None
    label = f"replay of {replay.get('of')} {at_pace(replay.get('pace'))}"
    if replay.get("sampled"):
        label += f", itself a replay of {replay['sampled']}"
    if replay.get("stopped"):
        label += f" ({replay.get('of')} was stopped: the replay ends where it did)"
    if why and replay.get("note"):
        label += f" ({replay['note']})"
    return label


def at_pace(pace: str | None) -> str:
    """A replay's pace as a sentence says it: "at its recorded pace", "at x4", "at 10000 tok/s"."""
    return "at its recorded pace" if (pace or "recorded") == "recorded" else f"at {pace}"


HAND_MADE = "written by hand, its words standing in for tokens"


def written_by_hand(run: Run) -> bool:
    """Whether the run's samples were read from texts alone (their "tokens" are words)."""
    return run.engine.get("tokens") == WORDS


def origin_note(run: Run) -> str | None:
    """One line a view of the run opens with when the run is no sampling of an engine: a replay's
    tokens are the recorded run's and its times its own; a hand-made run's "tokens" are words."""
    if of := replayed_from(run):
        if (sampled := sampled_by(run)) != of:
            return (f"⟲ A replay of {of}, itself a replay of {sampled}: its tokens and the engine's counts are "
                    f"{sampled}'s, its times the replay's.")
        return f"⟲ A replay of {of}: its tokens and the engine's counts are that run's, its times the replay's."
    return f"✎ A run {HAND_MADE}." if written_by_hand(run) else None


def marked(figure, run: Run, note: str | None = None):
    """``figure`` (a plotly figure of the run) with the run's origin under its title, so the chart
    says what it shows where it is seen alone (a tab, a saved PNG); ``note``: the chart's own
    sentence for it (the timing charts say whose times they show). A figure is marked once: its
    layout keeps the note (``meta["origin"]``, beside what else the figure keeps there, ``with_meta``),
    so a view that marks every figure it shows leaves a marked one as it is; a figure with a top
    margin of its own gets a line more of it for the note; anything that is no figure passes
    unchanged."""
    note = note or origin_note(run)
    layout = getattr(figure, "layout", None)
    if note is None or layout is None or not hasattr(layout, "title"):
        return figure
    if isinstance(layout.meta, dict) and "origin" in layout.meta:
        return figure
    title = layout.title.text or ""
    figure.update_layout(title_text=f"{title}<br><sup>{note}</sup>" if title else f"<sup>{note}</sup>")
    if title and layout.margin.t is not None:
        figure.update_layout(margin_t=layout.margin.t + NOTE_LINE)
    return with_meta(figure, origin=note)


NOTE_LINE = 22  # px a line of a title takes (plotly's title font, 17 px, at its line spacing)


def with_meta(figure, **fields):
    """``figure`` with ``fields`` added to its layout's ``meta``, a dict whoever sets it shares:
    the page reads whose run a chart draws (``meta["run"]``, the Graph tab's) and a figure is
    marked with its run's origin once (``meta["origin"]``); neither takes the other's away."""
    meta = figure.layout.meta
    figure.update_layout(meta={**(meta if isinstance(meta, dict) else {}), **fields})
    return figure
