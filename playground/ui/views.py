"""Run record -> what the page shows. Pure formatting: no engine calls, no Gradio events."""

from __future__ import annotations

import html
import time

from playground.analysis import (
    at_pace,
    branch_label,
    counted,
    identical_groups,
    model_name,
    origin_label,
    replayed_from,
    truncate,
    written_by_hand,
)
from playground.errors import NOT_RUN, RESTARTING
from playground.request import token_settings_changed
from playground.run import Run
from playground.ui.markdown import plain


def status_word(status: str) -> str:
    """A run's status as the page says it: a run the person stopped is "stopped" (its record says
    "aborted", vLLM's word) in the summary, History and the saved runs' list alike."""
    return "stopped" if status == "aborted" else status


def run_summary(run: Run) -> str:
    """One line under the controls: what ran, how it went, which seeds were used."""
    req = run.request
    tokens = sum(len(s.token_ids) for s in run.samples)
    elapsed = run.wall_time if run.wall_time is not None else (run.events[-1].t if run.events else 0.0)
    state = {"running": "● ", "finished": "✔ ", "aborted": "■ ", "error": "✖ "}.get(run.status, "") + \
        status_word(run.status)
    seeds = _seed_note(run)
    if written_by_hand(run):  # texts alone, never timed
        made = f"{tokens} words"
    else:
        rate = f" ({tokens / elapsed:.1f} tok/s)" if elapsed > 0 else ""
        made = f"{counted(tokens, 'token')} in {elapsed:.2f} s{rate} · {counted(len(run.events), 'event')}"
    # A stop string, a forced token's text and an error are anybody's words: written as text (ui/markdown.py).
    asked = " · ".join(part for part in (*(plain(req[name]) for name in ("mode", "output_kind") if req.get(name)),
                                         plain(sampler_marks(run))) if part)
    # What the run is, before what it did: a replay or samples written by hand say so first.
    origin = f" · {'⟲' if replayed_from(run) else '✎'} {plain(origin)}" if (origin := origin_label(run, why=True)) \
        else ""
    text = (f"{state}{origin} · `{req.get('request_id', '')}` · n={run.n} · {asked + ' · ' if asked else ''}{made} "
            f"· {seeds}")
    if branch := branch_label(run):
        text += f" · ⎇ {plain(branch)}"
    if run.status == "running":
        text += engine_requests_note(run)
    elif req.get("mode") == "same-seed" and run.n > 1 and req.get("seed") is not None:
        text += "\n\n" + same_seed_note(run)
    if run.status == "error" and run.error:
        text += f"\n\n{plain(run.error)}"
    return text


def same_seed_note(run: Run) -> str:
    """Same-seed mode is a demonstration: what it shows, said under the run that shows it."""
    alike = max((len(g) for g in identical_groups(run)), default=1)
    shown = (f"all {run.n} samples came out identical" if alike == run.n else
             f"{alike} of the {run.n} samples came out identical" if alike > 1 else "no two samples came out identical")
    return (f"ℹ️ Same-seed mode: every child drew with seed {run.request.get('seed')}, so {shown}. This was vLLM's "
            "V0 bug with n > 1 and a seed; giving child i the seed seed + i (the wrapper's and vLLM's own way) makes "
            "n different draws that a seed still reproduces.")


def engine_requests_note(run: Run) -> str:
    """What the engine holds for the run as it streams, from the latest event's count: vLLM counts
    each child as a request of its own (the parent is not one), on both the wrapper's and its own
    fan-out; beside the run's unfinished children, the rest are other runs'. Read from the latest
    event and the samples only: a line redrawn many times a second must not rescan the events."""
    latest = run.events[-1].engine_requests if run.events else None
    if latest is None:  # none yet, or a backend that does not count (a remote server)
        return ""
    others = latest - sum(s.finish_reason is None for s in run.samples)
    beside = f" ({others} from other runs)" if others > 0 else ""
    held = counted(latest, "request")
    children = f" · 1 parent → {counted(run.n, 'child request')}"
    if replayed_from(run):  # the counts are the recorded run's: no engine holds a replay's
        return f"{children} · {held} in the engine at this point when it was recorded{beside}"
    return f"{children} · {held} in the engine now{beside}"


def waiting_summary(run: Run) -> str:
    """The line while no event has arrived yet (FINAL_ONLY is silent until every sample is done)."""
    req = run.request
    why = " (FINAL_ONLY yields nothing until every sample is done)" if run.output_kind == "FINAL_ONLY" else ""
    elapsed = time.time() - run.started_at
    origin = f" · ⟲ {plain(origin_label(run, why=True))}" if replayed_from(run) else ""
    return (f"● running{origin} · `{req.get('request_id', '')}` · n={run.n} · {req.get('mode')} · {run.output_kind} · "
            f"waiting for the first output… {elapsed:.1f} s{why} · {_seed_note(run)}")


def queued_summary(live_run, waiting: int = 0) -> str:
    """The line while a checked run waits for a free slot (``live_run``: a queued LiveRun;
    ``waiting``: the app's runs that waited for one when it was pressed, shared with others)."""
    request = live_run.request
    before = f" (the app's queue holds {waiting} run{'s' if waiting != 1 else ''} before it)" if waiting else ""
    # A branch says where it starts from as its run's line will (the labels are its caller's)
    branch = branch_label(Run(request=dict(live_run.prepared.labels), samples=[]))
    return (f"⏳ queued: waiting for a free slot{before} · `{live_run.request_id}` · n={request.n} · {request.mode} · "
            f"{request.output_kind} · {_seeds(request.seed, request.n, request.mode)}"
            f"{f' · ⎇ {plain(branch)}' if branch else ''}")


def refused_summary(reason: str, button: str = "Run", engine_away: bool | None = False) -> str:
    """The line after a request was refused: nothing was sent, the page is ready for the next press
    of ``button`` (``engine_away``: once the engine answers, for nothing in the request is wrong;
    None: there is no engine to answer, and the reason says where to go instead)."""
    reason = plain(reason.removesuffix(NOT_RUN).rstrip("."))  # said below in the page's words; quoted values as text
    reason += "" if reason.endswith(("?", "!")) else "."
    if engine_away is None:
        return f"✖ refused: {reason}"
    then = f"press {button} again once it answers" if engine_away else f"change it and press {button} again"
    return f"✖ refused: {reason} Nothing was sent to the engine; {then}."


def beside_run_on_screen(line: str, run: Run | None) -> str:
    """The summary after a press that started nothing (refused, or another action going): what
    happened, then the line of the run still on screen, whose samples stay below it."""
    return f"{line}\n\nOn screen: {run_summary(run)}" if run is not None else line


def after_new_settings(summary: str | None, run: Run | None) -> str | None:
    """The summary once an example has refilled the form: a line about a press that started nothing
    (refused, or another action going) spoke of a form no longer there, so the line of the run on
    screen takes its place; None: the summary stays as it is."""
    if not summary or not summary.startswith(("✖ refused", "⚠️")):
        return None
    return run_summary(run) if run is not None else ""


def ended_summary(live_run) -> str:
    """The line for a run that ended before it had a record (stopped while queued, refused or
    failed before its first moment in the engine)."""
    state = live_run.state.value
    if state == "stopped":
        return f"■ {live_run.reason or 'stopped'}"
    if state == "refused":
        return refused_summary(live_run.reason or "refused")
    return f"✖ {state}: {live_run.reason or 'the run did not start'}"


def engine_down(info: dict) -> str:
    """Why no run can start now, from the backend's description."""
    if info.get("restarting"):
        return RESTARTING
    where = info.get("base_url")
    if info.get("problem"):  # what the last health check found
        return str(info["problem"])
    return f"the vLLM server at {where} does not answer" if where else "the vLLM engine is down"


def _seed_note(run: Run) -> str:
    return _seeds(run.request.get("seed"), run.n, run.request.get("mode"))


def _seeds(seed: int | None, n: int, mode: str | None) -> str:
    if seed is None:
        return "unseeded"
    if mode == "same-seed":
        return f"every sample seed {seed} (same-seed mode)"
    if n == 1:
        return f"seed {seed}"
    return f"seeds {seed}…{seed + n - 1} (sample i uses seed+i)"


def engine_status(info: dict, last_run: Run | None = None) -> str:
    """The model, the device, whether the engine is up, and the prefix-cache hits of the run on screen."""
    up = ("● restarting the engine" if info.get("restarting") else
          "⟲ a replay: no engine samples it" if info.get("backend") == "replay" else
          "● engine up" if info.get("up", True) else "✖ engine down")
    where = info.get("base_url") or info.get("device", "")
    version = info.get("vllm_version")  # a made-up run's replay names none
    parts = [f"**{model_name(info.get('model', '?'))}**", where, *([f"vLLM {version}"] if version not in
                                                                   (None, "?") else []), up]
    if info.get("output_kind_source"):  # what builds the output_kind views: "client-side (server streams DELTA)"
        parts.append(f"output_kind views {info['output_kind_source']}")
    if info.get("note"):
        parts.append(info["note"])
    if last_run is not None and last_run.n > 1 and not replayed_from(last_run):  # a replay's cache: nobody's
        parts.append(_cache_note(last_run, info.get("block_size")))
    return " · ".join(p for p in parts if p)


def _cache_note(run: Run, block_size: int | None) -> str:
    """Prefix-cache hits of children 1..n-1: only whole blocks of the prompt can be shared."""
    prompt = run.request.get("num_prompt_tokens", 0)
    if block_size and prompt < block_size:
        return (f"the run on screen: the children shared no prefill (its prompt of {prompt} tokens is shorter than "
                f"one {block_size}-token cache block)")
    cached = [s.num_cached_tokens for s in run.samples[1:] if s.num_cached_tokens is not None]
    if not cached:
        # vLLM's own fan-out says no child's hits; nor does a server's stream
        where = "in native mode" if run.request.get("mode") == "native" else "by this backend"
        return f"the run on screen: prefix-cache hits are not reported per child {where}"
    return (f"the run on screen: children 1..n-1 read {min(cached)}–{max(cached)} of {prompt} prompt tokens "
            f"from the prefix cache")


def rendered_prompt(rendered: str, num_tokens: int) -> str:
    """The exact string the model sees, whitespace shown, with its token count."""
    return (f"**{num_tokens} prompt tokens.** The exact string the model receives:\n\n"
            f"<pre class='rendered-prompt'>{html.escape(rendered)}</pre>")


def template_preview(rendered: str) -> str:
    """The chat template around a placeholder, before a prompt is typed."""
    return ("**The chat template is on:** your prompt is sent inside it, like this:\n\n"
            f"<pre class='rendered-prompt'>{html.escape(rendered)}</pre>")


def history_label(run: Run) -> str:
    prompt = " ".join(run.request.get("prompt", "").split())
    prompt = truncate(prompt, 41)
    of = f" · {origin}" if (origin := origin_marks(run)) else ""
    return (f"{run.request.get('request_id')} · n={run.n} · {settings_marks(run)} · "
            f"{status_word(run.status)}{of} · “{prompt}”")


def settings_marks(run: Run) -> str:
    """The settings that tell runs of one prompt apart in a list: "wrapper · DELTA · seed 31 ·
    temperature 0.3" (the session's History and the saved runs' list say them alike)."""
    seed = run.request.get("seed")
    return " · ".join(str(part) for part in (run.request.get("mode"), run.request.get("output_kind"),
                                            f"seed {seed}" if seed is not None else None, sampler_marks(run))
                      if part)


def sampler_marks(run: Run) -> str:
    """The settings that decide the tokens and were not left at their defaults, "temperature 0.3 ·
    max_tokens 32" (a sweep's value is said by its own mark, ``origin_marks``)."""
    swept = sweep.get("param") if isinstance(sweep := run.request.get("sweep"), dict) else None
    return " · ".join(f"{name} {_said(value)}" for name, value in token_settings_changed(run.request).items()
                      if name != swept)


def _said(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return repr(value) if isinstance(value, (list, str)) else f"{value:g}" if isinstance(value, float) else str(value)


def origin_marks(run: Run) -> str:
    """What a list says a run is beside a sampling of the engine ("" for one): a branch (of which
    run, sample and token, and the token forced there), a value of a sweep, a replay (of which run,
    at what pace), a rerun by the Reproducibility tab (of which run, which sample alone), or
    samples written by hand. The session's History and the saved runs' list say
    it alike."""
    marks = []
    if branch := run.request.get("branch"):
        mark = f"⎇ of {branch['run']} #{branch['sample']}@{branch['position']}"
        if branch.get("forced_token_id") is not None:  # branches of one point differ by their token
            forced = branch.get("forced_text")
            mark += f" forced {forced!r}" if forced is not None else f" forced id {branch['forced_token_id']}"
        marks.append(mark)
    if (sweep := run.request.get("sweep")) and isinstance(sweep, dict):
        marks.append(f"⇶ sweep {sweep.get('param')}={sweep.get('value')}")
    if replay := run.request.get("replay"):
        marks.append(f"⟲ replay of {replay.get('of')} {at_pace(replay.get('pace'))}")
    if (rerun := run.request.get("rerun")) and isinstance(rerun, dict):
        marks.append(f"↻ rerun of {rerun.get('of')} #{rerun['sample']} alone" if rerun.get("sample") is not None
                     else f"↻ {run.request.get('mode')} rerun of {rerun.get('of')}")
    if written_by_hand(run):
        marks.append("✎ written by hand")
    return " · ".join(marks)
