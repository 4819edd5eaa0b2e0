"""What a replayed run is, for people: a replay streams a recorded run again (at its pace or
faster, ``playground.backends.replay``) and is a run of its own, whose record says which run it
plays (``request["replay"]``). Every place that shows, exports or compares a run names it so
(the summary line, History, Compare, the report, ``analyze``), so a replay is never taken for a
sampling of the engine."""

from __future__ import annotations

from playground.run import Run


def replayed_from(run: Run | None) -> str | None:
    """The request id of the run ``run`` replays (None: no run, or not a replay)."""
    return (run.request.get("replay") or {}).get("of") if run is not None else None


def replay_label(run: Run, why: bool = False) -> str | None:
    """"replay of run-… at x4" (None for a run that is no replay); ``why``: with the reason the
    replay chose that run, when the request's settings differed from it."""
    replay = run.request.get("replay")
    if not replay:
        return None
    pace = replay.get("pace") or "recorded"
    label = f"replay of {replay.get('of')} " + ("at its recorded pace" if pace == "recorded" else f"at {pace}")
    if why and replay.get("note"):
        label += f" ({replay['note']})"
    return label
