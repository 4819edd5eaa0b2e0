"""Why two runs of the same seeds may give different tokens, read from their two records.

Seeded sampling reproduces token for token only under the same conditions. Two things change
them: the engine (dtype, kernels, versions, device, environment: ``run.engine["conditions"]``)
and the batch a request shares (floating-point order follows batch composition; there is no
batch-invariant mode on the CPU). The record has both: the engine's conditions, and, on every
event, how many requests the engine had unfinished (``Event.engine_requests``), from which the
requests that were not the run's own can be told.
"""

from __future__ import annotations

from typing import Any

from playground.request import TOKEN_SETTINGS
from playground.run import Run


def other_requests(run: Run) -> int | None:
    """The most requests in flight on the engine beside this run's own unfinished children, over
    its events; None when the backend did not count (a remote server, an old bundle)."""
    counts = [e.engine_requests for e in run.events if e.engine_requests is not None]
    if not counts:
        return None
    finished: set[int] = set()
    most = 0
    for event in run.events:
        finished |= {o.index for o in event.outputs if o.finish_reason is not None}
        if event.engine_requests is not None:
            # Counted as the event arrived: the children that finished in it have left the engine.
            own = run.n - len(finished)
            most = max(most, event.engine_requests - own)
    return most


def condition_changes(a: Run, b: Run) -> list[str]:
    """Engine conditions that differ between the two records, as 'name: A vs B'."""
    ca, cb = a.engine.get("conditions") or {}, b.engine.get("conditions") or {}
    if not ca or not cb:
        return []
    changes = []
    for key in sorted(set(ca) | set(cb)):
        if key == "environment":
            ea, eb = ca.get(key) or {}, cb.get(key) or {}
            changes += [f"{name}={ea.get(name)!r} vs {eb.get(name)!r}" for name in sorted(set(ea) | set(eb))
                        if ea.get(name) != eb.get(name)]
        elif ca.get(key) != cb.get(key):
            changes.append(f"{key}: {_show(ca.get(key))} vs {_show(cb.get(key))}")
    return changes


def why_different(a: Run, b: Run) -> list[str]:
    """Sentences naming each condition that differed between the two runs (empty: none known).

    Read only from the two records, so it works on saved bundles as well as live runs."""
    reasons = []
    changes = condition_changes(a, b)
    if changes:
        reasons.append("the engine differed: " + "; ".join(changes))
    elif not a.engine.get("conditions") or not b.engine.get("conditions"):
        reasons.append("the engine's conditions were not recorded for both runs (an older bundle or a "
                       "remote server), so an engine difference cannot be ruled out")
    if a.request.get("prompt_token_ids") != b.request.get("prompt_token_ids"):
        reasons.append("the prompt token ids differed")
    settings = [k for k in TOKEN_SETTINGS if a.request.get(k) != b.request.get(k)]  # not output_kind: delivery
    if settings:
        reasons.append("sampler settings differed: " + ", ".join(
            f"{k} {a.request.get(k)!r} vs {b.request.get(k)!r}" for k in settings))
    batch = _batch_reason(a, b)
    if batch:
        reasons.append(batch)
    if other_requests(a) is None or other_requests(b) is None:
        reasons.append("the engine's load was not recorded for both runs (a remote server, or an older bundle), "
                       "so other requests in the batch cannot be ruled out")
    return reasons


def _batch_reason(a: Run, b: Run) -> str | None:
    """Batch composition: n children share a batch, so a run of n differs from a replay of one
    sample alone; and requests of others (or another run's children) change it too."""
    parts = []
    if a.n != b.n:
        parts.append(f"{a.n} vs {b.n} samples shared a batch")
    others_a, others_b = other_requests(a), other_requests(b)
    if others_a is not None and others_b is not None and (others_a or others_b):
        parts.append(f"other requests were in flight on the engine (up to {others_a} beside the first run, "
                     f"{others_b} beside the second)")
    if a.request.get("mode") != b.request.get("mode"):
        parts.append(f"the children were added by {_who(a)} vs {_who(b)}")
    steps_a, steps_b = admission(a), admission(b)
    if steps_a is not None and steps_b is not None and steps_a != steps_b and a.n == b.n:  # else said above
        parts.append(f"the engine took the children in different steps ({steps_label(steps_a)} in the first run, "
                     f"{steps_label(steps_b)} in the second): a run's children reach the engine one by one, in vLLM's "
                     "own fan-out as in the wrapper's, and a step may start before the last has arrived")
    if not parts:
        return None
    return "the batch differed: " + "; ".join(parts)


def admission(run: Run) -> list[list[int]] | None:
    """The run's samples grouped by the engine step that first scheduled them, in order (from
    vLLM's per-request stats): ``[[0], [1, 2]]`` when sample 0's prefill ran alone and 1 and 2
    joined at the next step. None when a sample has no such stat (stats off, a remote server, an
    older bundle, a sample that never reached the engine)."""
    stamps = [(s.metrics or {}).get("scheduled_ts") for s in run.samples]
    if not stamps or any(t is None for t in stamps):
        return None
    groups: dict[float, list[int]] = {}
    for s, t in sorted(zip(run.samples, stamps), key=lambda pair: (pair[1], pair[0].index)):
        groups.setdefault(t, []).append(s.index)
    return list(groups.values())


def steps_label(groups: list[list[int]]) -> str:
    """``admission`` as words: '[0] then [1, 2]', or 'all 3 at once'."""
    if len(groups) == 1:
        return f"all {len(groups[0])} at once"
    return " then ".join(str(group) for group in groups)


def _who(run: Run) -> str:
    return "vLLM's own fan-out" if run.request.get("mode") == "native" else "the wrapper's fan-out"


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)
