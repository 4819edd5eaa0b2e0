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


def origin_label(run: Run, why: bool = False) -> str | None:
    """What the run is when it is no sampling of an engine (None when it is one): "replay of
    run-… at x4" (``why``: with the reason the replay chose that run, when the request's settings
    differed from it), or "written by hand" for samples read from texts alone (whose words stand in
    for their tokens, ``playground.bundles.hand_made``)."""
    replay = run.request.get("replay")
    if not replay:
        return HAND_MADE if written_by_hand(run) else None
    pace = replay.get("pace") or "recorded"
    label = f"replay of {replay.get('of')} " + ("at its recorded pace" if pace == "recorded" else f"at {pace}")
    if why and replay.get("note"):
        label += f" ({replay['note']})"
    return label


HAND_MADE = "written by hand, its words standing in for tokens"


def written_by_hand(run: Run) -> bool:
    """Whether the run's samples were read from texts alone (their "tokens" are words)."""
    return run.engine.get("tokens") == WORDS
