"""The QA matrix (playground.qa): every contract rule can fail on a small hand-built run; the
matrix orchestration on scripted paths; then the real thing on the session's engines (AsyncLLM and
LLMEngine): every rule held when healthy (but for one finding about vLLM itself, see
``LIVE_CUMULATIVE``), the right cells red under each deliberately broken path, and ``app.py qa``'s
exit status and table.

``app.py qa`` runs in this process with the session's engines injected (``commands.qa.build_paths`` is
replaced): starting its own two engines would cost two to five minutes on this machine per run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import re
from copy import copy
from pathlib import Path

import pytest
from vllm.sampling_params import RequestOutputKind

import app
from playground.analysis import admission
from playground.backends.recorder import Observation, RunRecorder
from playground.commands import exits
from playground.commands import qa as qa_cli
from playground.qa import contract
from playground.qa import matrix as qa
from playground.qa.cells import NOT_RUN
from playground.qa.rules import Rulebook, Subject
from playground.request import OUTPUT_KINDS, SampleRequest
from playground.run import Event, EventOutput, Run
from playground.sampling import aggregate

PROMPT = "Once upon a time, in a village at the edge of the sea,"
SEED = 1
PARENT = "run-1"  # the hand-built runs' request id


# --- hand-built runs ------------------------------------------------------------------------------

def out(index, text, ids, finish=None) -> EventOutput:
    return EventOutput(index=index, text=text, token_ids=list(ids), finish_reason=finish)


def script(kind: str) -> list[Event]:
    """A healthy n=3 run of ``kind``: sample 1 finishes early (in event 1), the others in event 2."""
    if kind == "FINAL_ONLY":
        return [Event(0.3, True, [out(0, "abc", [1, 2, 3], "length"), out(1, "d", [4], "stop"),
                                  out(2, "efg", [5, 6, 7], "length")])]
    if kind == "DELTA":
        return [Event(0.1, False, [out(0, "a", [1]), out(1, "d", [4]), out(2, "e", [5])]),
                Event(0.2, False, [out(2, "f", [6]), out(0, "b", [2]), out(1, "", [], "stop")]),
                Event(0.3, True, [out(0, "c", [3], "length"), out(2, "g", [7], "length")])]
    return [Event(0.1, False, [out(0, "a", [1]), out(1, "d", [4]), out(2, "e", [5])]),
            Event(0.2, False, [out(2, "ef", [5, 6]), out(0, "ab", [1, 2]), out(1, "d", [4], "stop")]),
            Event(0.3, True, [out(0, "abc", [1, 2, 3], "length"), out(2, "efg", [5, 6, 7], "length")])]


def record(kind: str, events: list[Event], n: int = 3, seed: int = 10, mode: str = "wrapper") -> Run:
    """A Run as the recorder builds it from ``events`` (seeds by the seed+i rule)."""
    seeds = [seed] * n if mode == "same-seed" else [seed + i for i in range(n)]
    recorder = RunRecorder({"prompt": "p", "n": n, "seed": seed, "mode": mode, "output_kind": kind,
                            "request_id": PARENT}, seeds)
    recorder.t0 = 0.0
    for event in events:
        recorder.observe(Observation(event=copy(event)))
    return recorder.finish()


def check(run: Run, final: Run | None = None, **around) -> list:
    """Every rule ``run`` breaks, in rule order. ``final``: the same request's FINAL_ONLY run on the
    same path; ``around``: the rest of what a ``Subject`` knows about the run."""
    return contract.RULEBOOK.judge(Subject(run, final, **around)).violations


def rules(violations) -> list[str]:
    return [v.rule for v in violations]


@pytest.mark.parametrize("kind", ["CUMULATIVE", "DELTA", "FINAL_ONLY"])
def test_a_healthy_run_of_each_kind_holds_every_rule(kind):
    run = record(kind, script(kind))
    assert check(run) == []
    assert check(run, final=record("FINAL_ONLY", script("FINAL_ONLY"))) == []
    same_seed = record(kind, script(kind), mode="same-seed")
    assert [s.seed for s in same_seed.samples] == [10, 10, 10]
    assert check(same_seed) == [], "same-seed mode expects one seed for all"


def _events(kind, change):
    events = script(kind)
    change(events)
    return events


# Each case: a run that breaks exactly one rule, the rule, and what its message must say.
BROKEN_EVENTS = [
    ("FINAL_ONLY", lambda e: e.insert(0, Event(0.1, False, [out(0, "a", [1])])), "event-count",
     "FINAL_ONLY yielded 2 events, expected exactly 1"),
    ("FINAL_ONLY", lambda e: e[0].outputs.reverse(), "event-shape",
     "the FINAL_ONLY event holds the samples in order 2, 1, 0, expected index order 0..2"),
    ("DELTA", lambda e: e.insert(1, Event(0.15, False, [])), "event-shape", "event 1 holds no sample"),
    ("CUMULATIVE", lambda e: e[0].outputs.append(out(0, "a", [1])), "event-shape",
     "event 0 holds sample 0 more than once"),
    ("DELTA", lambda e: setattr(e[0], "finished", True), "finished-flag",
     "event 0 of 3 is marked finished, but only the last event may be"),
    ("CUMULATIVE", lambda e: setattr(e[-1], "finished", False), "finished-flag",
     "the last event (event 2) is not marked finished"),
    ("CUMULATIVE", lambda e: e[2].outputs.append(out(1, "d", [4])), "after-finish",
     "sample 1 appears in event 2 after it finished in event 1"),
    ("DELTA", lambda e: setattr(e[2].outputs[1], "finish_reason", None), "finish-reason",
     "sample 2 never finished: no event carries its finish_reason"),
    ("FINAL_ONLY", lambda e: e[0].outputs.pop(), "event-shape",
     "the FINAL_ONLY event holds samples 0, 1, expected all n=3"),
    ("CUMULATIVE", lambda e: e[1].outputs.__setitem__(0, out(2, "xf", [9, 6])), "cumulative-grows",
     "sample 2's value in event 1 does not extend its value in event 0: first difference at token 0 (id 5 vs id 9)"),
]


@pytest.mark.parametrize("kind, change, rule, message", BROKEN_EVENTS,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(BROKEN_EVENTS)])
def test_each_event_rule_can_fail(kind, change, rule, message):
    violations = check(record(kind, _events(kind, change)))
    assert rule in rules(violations), violations
    assert any(v.rule == rule and message in v.message for v in violations), violations
    # The FINAL_ONLY event missing a sample also leaves sample 2 in no event: two findings, one cause.
    allowed = {rule, "indices"} if rule == "event-shape" and "expected all n" in message else {rule}
    assert set(rules(violations)) == allowed, violations


def test_indices_outside_and_missing_are_named():
    run = record("DELTA", script("DELTA"))
    run.events[1].outputs.append(out(3, "z", [], None))  # the recorder would refuse index 3; a bad backend may not
    assert [str(v) for v in check(run)] == ["indices: event 1 holds index 3, outside 0..2"]

    events = [Event(0.1, False, [out(0, "a", [1], "length")]), Event(0.2, True, [out(1, "d", [4], "stop")])]
    run = record("DELTA", events)
    assert [str(v) for v in check(run)] == ["indices: sample 2 appears in no event"]

    run = record("CUMULATIVE", script("CUMULATIVE"))
    run.samples.pop()
    assert "indices: the run records samples 0, 1, expected 0..2 (n=3)" in [str(v) for v in check(run)]


def test_final_values_are_held_to_the_final_only_cell_and_the_record():
    final = record("FINAL_ONLY", script("FINAL_ONLY"))
    # A DELTA piece lost on the way: the record agrees with the events, but not with FINAL_ONLY.
    lost = record("DELTA", _events("DELTA", lambda e: e[1].outputs.__setitem__(1, out(0, "", []))))
    assert check(lost) == [], "without a final reference a consistent record cannot tell"
    assert [str(v) for v in check(lost, final=final)] == [(
        "delta-concat: DELTA pieces of sample 0 concatenate to 2 tokens, but this path's FINAL_ONLY cell has 3: "
        "first difference at token 1 (id 3 vs id 2)")]
    # The last CUMULATIVE value is not the final one.
    stale = record("CUMULATIVE", _events("CUMULATIVE", lambda e: e[2].outputs.__setitem__(
        1, out(2, "efh", [5, 6, 8], "length"))))
    assert [v.rule for v in check(stale, final=final)] == ["cumulative-last"]
    assert "sample 2 is 3 tokens, but this path's FINAL_ONLY cell has 3: first difference at token 2 (id 8 vs id 7)" \
        in check(stale, final=final)[0].message
    # Same tokens, other text.
    retexted = record("CUMULATIVE", _events("CUMULATIVE", lambda e: setattr(e[2].outputs[0], "text", "abX")))
    assert [str(v) for v in check(retexted, final=final)] == [(
        "cumulative-last: the last CUMULATIVE value of sample 0 is the text 'abX', but this path's FINAL_ONLY "
        "cell has 'abc'")]
    # A record whose samples are not what the events say.
    run = record("FINAL_ONLY", script("FINAL_ONLY"))
    run.samples[1].token_ids = [4, 4]
    assert [v.rule for v in check(run)] == ["final-only-values"]


def test_seeds_status_and_same_seed():
    run = record("DELTA", script("DELTA"))
    run.samples[2].seed = 10  # the old bug: every child with the parent's seed
    assert [str(v) for v in check(run)] == ["seeds: sample 2 has seed 10, expected 12 (seed 10 + 2)"]
    run = record("DELTA", script("DELTA"), mode="same-seed")
    run.samples[1].seed = 11
    assert [str(v) for v in check(run)] == ["seeds: sample 1 has seed 11, expected 10 (same-seed mode)"]
    run = record("DELTA", script("DELTA"))
    run.status, run.error = "aborted", "stopped before the last sample finished"
    assert [str(v) for v in check(run)] == [
        "status: the run ended aborted: stopped before the last sample finished"]
    assert check(Run(request={"n": 2, "output_kind": "DELTA"}, samples=[], status="error"))[0].rule == "status"


# --- the path's conduct, on hand-built runs ---------------------------------------------------------

# The engine's count of unfinished requests with each event of script(kind): vLLM counts the
# children, and a child that finished in an event has left by the time the caller sees it.
COUNTS = {"CUMULATIVE": [3, 2, 0], "DELTA": [3, 2, 0], "FINAL_ONLY": [0]}


def conducted(kind: str) -> Run:
    """script(kind) as a healthy embedded path records it: every event carries the parent's id and
    the engine's count, and the backend watched its outputs (none changed)."""
    events = script(kind)
    for event, count in zip(events, COUNTS[kind], strict=True):
        event.request_id, event.engine_requests = PARENT, count
    run = record(kind, events)
    run.mutated_events = []
    return run


def stopped(kind: str = "DELTA") -> Run:
    """The same request stopped at its first output."""
    run = record(kind, script(kind)[:1])
    run.status, run.error = "aborted", "stopped before the last sample finished"
    return run


AROUND = {"before": 0, "after": 0}  # alone on an idle engine, and idle again at the end


def test_the_rule_table_is_read_from_the_registered_rules():
    names = [r.name for r in contract.RULEBOOK.rules]
    assert list(contract.RULES) == names and qa.RULES is contract.RULES
    assert names[-4:] == ["no-mutation", "parent-id", "accounting", "run-error"], "conduct after the output kinds"
    assert all(r.meaning == contract.RULES[r.name] and callable(r.check) for r in contract.RULEBOOK.rules)
    assert "n per parent" in contract.RULES["accounting"], "the measured accounting is stated in its meaning"
    book = Rulebook()
    book.rule("x", "one")(lambda s: [])
    with pytest.raises(ValueError, match="two rules are named 'x'"):
        book.rule("x", "another")(lambda s: [])
    with pytest.raises(ValueError, match="rules named twice: x"):
        book + book  # noqa: B018


@pytest.mark.parametrize("kind", ["CUMULATIVE", "DELTA", "FINAL_ONLY"])
def test_a_healthy_path_holds_every_conduct_rule_and_shows_each(kind):
    judgement = contract.RULEBOOK.judge(Subject(conducted(kind), **AROUND, stopped=stopped(), after_stop=0))
    assert judgement.violations == [] and judgement.unchecked == []


def _conduct(change):
    run = conducted("CUMULATIVE")
    change(run)
    return run


def _counts(*counts):
    def change(run):
        for event, count in zip(run.events, counts, strict=True):
            event.engine_requests = count
    return change


# Each case: a run, what is known around it, the one rule it breaks, and what its message must say.
BROKEN_CONDUCT = [
    (lambda r: setattr(r, "mutated_events", [0, 1]), {}, "no-mutation",
     "2 of 3 outputs changed after they were yielded (event 0, 1): a caller that kept them saw them change"),
    (lambda r: setattr(r.events[1], "request_id", "1_run-1"), {}, "parent-id",
     "event 1 carries the request id '1_run-1', not the parent's 'run-1'"),
    (lambda r: [setattr(e, "request_id", f"{k}_run-1") for k, e in enumerate(r.events)], {}, "parent-id",
     "event 0 carries the request id '0_run-1', not the parent's 'run-1' (so do 2 more of its 3 events, with "
     "'1_run-1', '2_run-1')"),
    (lambda r: setattr(r.events[2], "request_id", None), {}, "parent-id",
     "event 2 carries no request id, not the parent's 'run-1'"),
    (_counts(3, 3, 0), {}, "accounting",
     "event 1 counts 3 requests unfinished in the engine, but only 2 of the run's 3 children were unfinished then"),
    (_counts(3, 2, 1), {}, "accounting", "event 2 counts 1 request unfinished in the engine, but only 0 of"),
    (_counts(1, 1, 0), {}, "accounting",  # an engine that counted the parent
     "the first event counts 1 request unfinished in the engine, expected the run's 3 unfinished children: the "
     "engine counts each child, not the parent"),
    (lambda r: None, {"after": 3}, "accounting",
     "the engine still had 3 requests unfinished after the run ended, and none when it started: a child was left "
     "running"),
    (lambda r: None, {"stopped": stopped(), "after_stop": 2}, "accounting",
     "after a run of this request was stopped at its first output, the engine still had 2 requests unfinished as "
     "the stop returned, and not 0 within the matrix's wait: the stop did not abort every child"),
    (lambda r: None, {"stopped": stopped(), "after_stop": 1, "settled_after_stop": 0.25}, "accounting",
     "still had 1 request unfinished as the stop returned, and 0 again 0.25 s later: the stop returned while its "
     "children were still in the engine"),
    (lambda r: None, {"stopped": stopped(), "after_stop": 0, "stop_error": "the engine core died", "source": "sync"},
     "run-error", "the sync path raised when a run of it was stopped: the engine core died"),
]


@pytest.mark.parametrize("change, around, rule, message", BROKEN_CONDUCT,
                         ids=[f"{c[2]}-{i}" for i, c in enumerate(BROKEN_CONDUCT)])
def test_each_conduct_rule_can_fail(change, around, rule, message):
    violations = check(_conduct(change), **{**AROUND, **around})
    assert rules(violations) == [rule], violations
    assert message in violations[0].message


def test_final_only_counts_nothing_left_and_a_raising_path_is_judged_without_a_run():
    run = conducted("FINAL_ONLY")
    run.events[0].engine_requests = 3
    assert [str(v) for v in check(run, **AROUND)] == [
        "accounting: event 0 counts 3 requests unfinished in the engine, but only 0 of the run's 3 children were "
        "unfinished then"]
    judgement = contract.RULEBOOK.judge(Subject(None, source="sync native", error="the engine core died"))
    assert [str(v) for v in judgement.violations] == ["run-error: the sync native path raised: the engine core died"]


def test_conduct_rules_say_what_a_run_cannot_show():
    """A rule that cannot see its facts says so, instead of passing or failing on nothing."""
    def reasons(run, **around):
        judgement = contract.RULEBOOK.judge(Subject(run, **around))
        assert judgement.violations == []
        return {u.rule: u.reason for u in judgement.unchecked}

    assert reasons(record("DELTA", script("DELTA"))) == {
        "no-mutation": "the path did not watch the outputs it yielded (record(..., watch=True))",
        "parent-id": "the run records no request id for its outputs",
        "accounting": "the engine's count of unfinished requests around the run is unknown"}
    remote = record("DELTA", script("DELTA"))
    remote.engine = {"backend": "openai"}
    found = reasons(remote, **AROUND, stopped=stopped(), after_stop=0)
    assert found["no-mutation"].startswith("the remote path parses the server's stream into new objects")
    assert found["parent-id"].startswith("the remote path rebuilds every output on the client")
    assert found["accounting"].startswith("a remote server's count is read from its /metrics before and after")
    assert reasons(conducted("DELTA"), before=2, after=2) == {
        "accounting": "2 requests of others were in flight on the engine when the run started, so the counts are "
                      "not this run's alone"}
    assert reasons(conducted("DELTA"), **AROUND, stopped=record("DELTA", script("DELTA")), after_stop=0) == {
        "accounting": "the run meant to be stopped at its first output ended finished before it"}


# --- the matrix on scripted paths ----------------------------------------------------------------

def scripted_path(name: str, mode: str, engine: str, log: list, in_flight=lambda: 0, change=None,
                  stop=None) -> qa.SamplingPath:
    """A SamplingPath that returns a recorded healthy run for the request's kind, and logs what it saw.
    ``in_flight()`` scripts the engine's count at a cell's start and end; while its run goes (the
    matrix reads the count then too) the scripted engine holds nothing else."""
    running = [False]

    async def run(request: SampleRequest) -> Run:
        running[0] = True
        log.append(("start", name, request.output_kind, request.mode, request.seed))
        await asyncio.sleep(0)  # another cell would get in here if cells overlapped
        events = script(request.output_kind)
        if change is not None:
            change(request.output_kind, events)
        result = record(request.output_kind, events, n=request.n, seed=request.seed, mode=request.mode)
        log.append(("end", name))
        running[0] = False
        return result

    async def count() -> int:
        return 0 if running[0] else in_flight()

    return qa.SamplingPath(name, mode, engine, run, count, stop)


# A scripted path records no engine counts, request ids or snapshots: those rules are not checked,
# and its cells say so.
SCRIPTED_OK = "✔ (no-mutation, parent-id, accounting not checked)"


def test_the_matrix_runs_every_cell_alone_checks_and_exports():
    log: list = []
    paths = [scripted_path("async wrapper", "wrapper", "AsyncLLM", log),
             scripted_path("async native", "native", "AsyncLLM", log)]
    matrix = asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=10, output_kind="DELTA"), paths))

    starts = [entry for entry in log if entry[0] == "start"]
    assert len(starts) == 6 and all(log[2 * k][0] == "start" and log[2 * k + 1][0] == "end" for k in range(6)), \
        "cells must run one at a time"
    assert {(s[2], s[3], s[4]) for s in starts} == {(k, m, 10) for k in OUTPUT_KINDS for m in ("wrapper", "native")}
    assert matrix.ok and qa.ONE_AT_A_TIME in matrix.notes
    assert "All 6 cells ran alone on their engine." in matrix.notes  # the outcome, said once for the matrix
    assert matrix.table().to_dict() == {"async wrapper": dict.fromkeys(OUTPUT_KINDS, SCRIPTED_OK),
                                        "async native": dict.fromkeys(OUTPUT_KINDS, SCRIPTED_OK)}
    assert matrix.groups == [[c.label for c in matrix.cells]] and matrix.comparisons == []
    assert all(c.in_flight_at_start == 0 and c.in_flight_at_end == 0 for c in matrix.cells)

    data = json.loads(matrix.to_json())
    assert data["ok"] is True and len(data["cells"]) == 6
    assert all(Run.from_dict(c["run"]).n == 3 for c in data["cells"]), "every cell's run bundle is in the file"
    again = qa.Matrix.from_json(matrix.to_json())
    assert again.table().equals(matrix.table()) and again.ok


def test_a_blank_seed_is_drawn_once_for_every_cell():
    log: list = []
    paths = [scripted_path("async wrapper", "wrapper", "AsyncLLM", log)]
    matrix = asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=None), paths))
    seeds = {entry[4] for entry in log if entry[0] == "start"}
    assert len(seeds) == 1 and None not in seeds and matrix.request["seed"] in seeds


def test_a_cell_whose_children_the_engine_took_in_other_steps_is_not_held_to_final_only():
    """Alone on the engine, but its first child's prefill ran alone (vLLM's stats say so): its
    tokens may differ from the FINAL_ONLY cell's, and the matrix says why rather than turn it red."""
    def other_batch(kind, events):  # sample 2's second token differs, as another batch made it
        for event in events if kind == "DELTA" else []:
            for o in event.outputs:
                if o.index == 2:
                    o.token_ids = [9 if t == 6 else t for t in o.token_ids]

    path = scripted_path("async native", "native", "AsyncLLM", [], change=other_batch)
    scripted = path.run

    async def run(request: SampleRequest) -> Run:
        recorded = await scripted(request)
        stamps = [1.0, 1.0, 1.0] if request.output_kind == "FINAL_ONLY" else [1.0, 2.0, 2.0]
        for sample, stamp in zip(recorded.samples, stamps):
            sample.metrics = {"scheduled_ts": stamp}
        return recorded

    matrix = asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=10),
                                       [dataclasses.replace(path, run=run)]))
    delta = matrix.cell("DELTA", "async native")
    assert matrix.ok and delta.ok, [str(v) for v in delta.violations]
    assert delta.notes == ["final values differ from this path's FINAL_ONLY cell's, and the engine took the children "
                           "in different steps ([0] then [1, 2]; FINAL_ONLY all 3 at once): their batches differed, "
                           "so the difference is not a contract failure"]
    cumulative = matrix.cell("CUMULATIVE", "async native")  # other steps too, but the same tokens: held, no note
    assert cumulative.ok and cumulative.notes == [] and admission(cumulative.run) == [[0], [1, 2]]
    assert [str(c).split(": sample")[0] for c in matrix.comparisons] == [
        "DELTA × async native differs from CUMULATIVE × async native"]
    assert "the children taken in the same steps" in str(matrix.comparisons[0])  # [0] then [1, 2] in both


def test_a_cell_on_a_server_is_not_held_to_final_only_when_its_tokens_differ():
    """A server's steps cannot be seen from here (no per-request stats come back), and its seeded
    runs may differ from one to the next: a streamed cell whose tokens differ from the FINAL_ONLY
    cell's is said so, not red; its own events are still checked against its own samples."""
    def other_run(kind, events):  # sample 2's second token differs, as another run on the server made it
        for event in events if kind == "DELTA" else []:
            for o in event.outputs:
                if o.index == 2:
                    o.token_ids = [9 if t == 6 else t for t in o.token_ids]

    path = scripted_path("remote wrapper", "wrapper", "vLLM server http://127.0.0.1:8000/v1", [], change=other_run)
    matrix = asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=10), [path]))
    delta = matrix.cell("DELTA", "remote wrapper")
    assert matrix.ok and delta.ok, [str(v) for v in delta.violations]
    assert delta.notes == ["final values differ from this path's FINAL_ONLY cell's, and a server's engine cannot be "
                           "watched or paused from here, and there the same seeded request can give other tokens from "
                           "one run to the next (its children may enter its engine over two steps), so the difference "
                           "is not a contract failure"]
    on_an_engine = dataclasses.replace(path, name="async wrapper", engine="AsyncLLM")  # here it would be red
    assert not asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=10), [on_an_engine])).ok


def test_red_cells_divergence_and_batch_composition_are_reported():
    log: list = []
    busy = iter([0, 0, 2, 2] + [0] * 20)  # async native's DELTA cell starts and ends with 2 others in flight

    def other_engine(kind, events):  # the sync engine samples another token for sample 1
        for event in events:
            for o in event.outputs:
                if o.index == 1:
                    o.token_ids = [8 if t == 4 else t for t in o.token_ids]

    def busy_batch(kind, events):  # in a busy batch sample 2's second token differs
        for event in events if kind == "DELTA" else []:
            for o in event.outputs:
                if o.index == 2:
                    o.token_ids = [9 if t == 6 else t for t in o.token_ids]

    def lose_a_piece(kind, events):  # sync wrapper's DELTA loses sample 0's second piece: a real bug
        other_engine(kind, events)
        if kind == "DELTA":
            events[1].outputs[1] = out(0, "", [])

    paths = [scripted_path("async wrapper", "wrapper", "AsyncLLM", log),
             scripted_path("async native", "native", "AsyncLLM", log, in_flight=lambda: next(busy), change=busy_batch),
             scripted_path("sync wrapper", "wrapper", "LLMEngine", log, change=lose_a_piece),
             scripted_path("sync native", "native", "LLMEngine", log, change=other_engine)]
    matrix = asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=10), paths))

    red = {c.label: [str(v) for v in c.violations] for c in matrix.cells if not c.ok}
    assert red == {"DELTA × sync wrapper": [("delta-concat: DELTA pieces of sample 0 concatenate to 2 tokens, but "
                                             "this path's FINAL_ONLY cell has 3: first difference at token 1 "
                                             "(id 3 vs id 2)")]}
    assert not matrix.ok
    assert matrix.table().loc["DELTA", "sync wrapper"].startswith("✖ delta-concat: DELTA pieces of sample 0")
    busy_cell = matrix.cell("DELTA", "async native")
    assert (busy_cell.in_flight_at_start, busy_cell.in_flight_at_end) == (2, 2) and not busy_cell.alone
    assert busy_cell.ok, "a busy cell that diverged is not held to its FINAL_ONLY cell"
    assert any(note.startswith("1 of the ") and "cells shared their engine with other requests (DELTA × async "
               "native)" in note for note in matrix.notes), matrix.notes
    assert any("not compared with this path's FINAL_ONLY cell: other requests were in flight on the engine "
               "(2 at start, 2 at end" in note for note in busy_cell.notes)

    assert len(matrix.groups) == 4  # async, sync, the busy cell, the buggy cell
    notes = [str(c) for c in matrix.comparisons]
    # Two engines: said plainly, not blamed on a batch.
    assert ("CUMULATIVE × sync wrapper differs from CUMULATIVE × async wrapper: sample 1 first diverges at token 0 "
            "(id 4 vs id 8). They ran on different engines (AsyncLLM vs LLMEngine)") in notes[0]
    # One engine, a busy cell against an idle one: the batches differed, and the note says so.
    assert notes[1].startswith("DELTA × async native differs from CUMULATIVE × async wrapper: sample 2 first "
                               "diverges at token 1 (id 6 vs id 9). Batch composition differed: other requests "
                               "were in flight on AsyncLLM")
    # One engine, both alone: nothing to blame but the cells themselves.
    assert any(n.startswith("DELTA × sync wrapper differs from CUMULATIVE × sync wrapper: sample 0 first diverges "
                            "at token 1 (id 2 vs id 3). Same engine (LLMEngine), both alone") for n in notes), notes
    text = matrix.report()
    assert "Verdict: 1 of 12 cells breaks a contract rule." in text and "Broken rules:" in text
    assert all(n in text for n in notes)


def test_a_path_that_raises_is_a_red_cell_and_the_rest_still_run():
    log: list = []
    good = scripted_path("async wrapper", "wrapper", "AsyncLLM", log)

    async def boom(request):
        raise RuntimeError("the engine core died")

    bad = qa.SamplingPath("sync wrapper", "wrapper", "LLMEngine", boom, good.in_flight)
    matrix = asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=1), [good, bad]))
    assert [c.verdict() for c in matrix.cells if c.path == "sync wrapper"] == [
        "✖ run-error: the sync wrapper path raised: the engine core died"] * 3
    assert all(c.ok for c in matrix.cells if c.path == "async wrapper") and not matrix.ok
    assert len(matrix.to_dict()["cells"]) == 6


def test_streamed_cells_are_stopped_once_and_the_engine_must_be_idle_after():
    """Each streamed cell runs its request again and stops it at its first output; a stop that leaves
    requests behind, or raises, turns the cell red. FINAL_ONLY has nothing to stop at."""
    log: list = []
    left: list[int] = []  # what the engine counts as the next stop returns

    async def leave_two(request):
        log.append(("stop", request.output_kind))
        left.append(2)  # a stop that returned before its two children were aborted: gone at the next count
        return stopped(request.output_kind)

    async def raise_on_stop(request):
        raise RuntimeError("the engine core died")

    paths = [scripted_path("async wrapper", "wrapper", "AsyncLLM", log, in_flight=lambda: left.pop() if left else 0,
                           stop=leave_two),
             scripted_path("async native", "native", "AsyncLLM", log, stop=raise_on_stop)]
    matrix = asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=10), paths))

    assert [entry for entry in log if entry[0] == "stop"] == [("stop", "CUMULATIVE"), ("stop", "DELTA")]
    leaky = matrix.cell("DELTA", "async wrapper")
    assert (leaky.stopped.status, leaky.in_flight_after_stop, leaky.alone) == ("aborted", 2, True)
    assert 0 < leaky.stop_settled_s < 1, "polled until the engine was idle again"
    assert leaky.verdict() == ("✖ accounting: after a run of this request was stopped at its first output, the engine "
                               "still had 2 requests unfinished as the stop returned, and 0 again "
                               f"{leaky.stop_settled_s:.2f} s later: the stop returned while its children were still "
                               "in the engine")
    assert matrix.cell("DELTA", "async native").verdict() == (
        "✖ run-error: the async native path raised when a run of it was stopped: the engine core died")
    final_only = matrix.cell("FINAL_ONLY", "async wrapper")
    assert final_only.ok and final_only.stopped is None and final_only.in_flight_after_stop is None
    again = qa.Matrix.from_json(matrix.to_json())
    assert again.to_dict() == matrix.to_dict() and again.cell("DELTA", "async wrapper").stopped.status == "aborted"
    assert json.loads(matrix.to_json())["rules"] == contract.RULES
    text = matrix.report()
    assert "Verdict: 4 of 6 cells break a contract rule." in text
    assert f"Rules: {', '.join(contract.RULES)}" in text
    # Hand-built runs carry no ids, counts or watch: said once per rule and reason, by path.
    assert ("  no-mutation on async wrapper (every output_kind); async native (every output_kind): the path did not "
            "watch the outputs it yielded") in text


def test_command_exit_status_and_usage_errors(capsys):
    log: list = []
    paths = [scripted_path("async wrapper", "wrapper", "AsyncLLM", log)]
    assert qa_cli.main(["--prompt", "p", "--n", "3", "--seed", "4"], paths=paths) == exits.OK
    printed = capsys.readouterr().out
    assert "output_kind" in printed and "async wrapper" in printed and printed.count("✔") == 3
    assert "Verdict: no cell breaks a rule; in 3 of 3 cells some could not be checked (above)." in printed

    def finished_early(kind, events):
        events[0].finished = True

    broken = [scripted_path("async wrapper", "wrapper", "AsyncLLM", log, change=finished_early)]
    assert qa_cli.main(["--prompt", "p", "--n", "3", "--seed", "4"], paths=broken) == exits.FAILED
    assert "✖ finished-flag: event 0 of 3 is marked finished" in capsys.readouterr().out

    for argv, message in [(["--n", "3"], "the following arguments are required: --prompt"),
                          (["--prompt", "p", "--n", "3", "--temperature", "0"], "greedy sampling"),
                          (["--prompt", "p", "--paths", "async,gpu"], "argument --paths: takes a comma-separated list"),
                          (["--prompt", "p", "--paths", "remote"], "--paths remote needs --backend openai"),
                          (["--prompt", "p", "--json", "/no/such/folder/m.json"], "does not exist"),
                          (["--prompt", "p", "--mode", "native"], "--mode: the matrix runs every output_kind, in "
                                                                  "wrapper and native mode: leave it out")]:
        assert qa_cli.main(argv, paths=paths) == exits.USAGE, argv
        assert message in capsys.readouterr().err, argv


def test_the_grid_colours_cells_and_maps_clicks_to_cells():
    import gradio as gr

    from playground.ui import qa_tab

    log: list = []

    def early(kind, events):
        events[0].finished = True

    paths = [scripted_path("async wrapper", "wrapper", "AsyncLLM", log, change=early),
             scripted_path("async native", "native", "AsyncLLM", log)]
    matrix = asyncio.run(qa.run_matrix(SampleRequest(prompt="p *bold* <b>", n=3, seed=4), paths))
    shown = gr.Dataframe(interactive=False).postprocess(qa_tab.grid(matrix))
    assert shown.data[0] == ["CUMULATIVE", ("✖ finished-flag: event 0 of 3 is marked finished, but only the last "
                                            "event may be"), SCRIPTED_OK]
    styling = shown.metadata["styling"]
    assert [row[1:] for row in styling] == [[qa_tab.RED, qa_tab.AMBER]] * 2 + [[qa_tab.AMBER] * 2]
    assert qa_tab.cell_at(matrix, [1, 1]) is matrix.cell("DELTA", "async wrapper")
    assert qa_tab.cell_at(matrix, [2, 2]) is matrix.cell("FINAL_ONLY", "async native")
    assert [qa_tab.cell_at(matrix, i) for i in ([0, 0], [3, 1], [0, 3], None)] == [None] * 4
    text = qa_tab.report(matrix)
    assert text.startswith("**✖ 2 of 6 cells break a contract rule.** Divergence")  # the wrapper's: ours
    assert r"'p \*bold\* \<b\>'" in text, "quoted prompts and samples must not turn into markup"
    natives = [scripted_path("async wrapper", "wrapper", "AsyncLLM", log),
               scripted_path("async native", "native", "AsyncLLM", log, change=early)]
    text = qa_tab.report(asyncio.run(qa.run_matrix(SampleRequest(prompt="p", n=3, seed=4), natives)))
    assert "Each is on vLLM's native path (its own fan-out of n), so the break is vLLM's own" in text


# --- the real engines ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runner(sync_engine):
    from playground.backends.sync import SyncRunner

    return SyncRunner(sync_engine)


@pytest.fixture(scope="module")
def paths(backend, runner) -> list[qa.SamplingPath]:
    return qa.backend_paths(backend, "async") + qa.sync_paths(runner, "sync")


def run_command(argv: list[str], paths: list[qa.SamplingPath], monkeypatch) -> tuple[int, str]:
    """``app.main(["qa", ...])`` in this process on the session's engines: build_paths hands
    them over (honouring --paths) instead of starting engines."""
    def build_paths(args, engine_kwargs, front_ends, owner):
        return [p for p in paths if p.name.split()[0] in front_ends]

    monkeypatch.setattr(qa_cli, "build_paths", build_paths)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = app.main(["qa", *argv])
    return status, out.getvalue()


# Findings on the installed stack: rules that healthy cells break today. Each is a fact about the
# code under test, not a choice of the tests; fixing one shrinks ``findings`` (see the functions).

def live_cumulative(cell: qa.Cell) -> list[int]:
    """The events a healthy cell's caller sees change on the installed vLLM (0.32).

    vLLM hands each CUMULATIVE output its request's live token list
    (OutputProcessor._new_completion_output: ``token_ids = self.detokenizer.output_token_ids``), so
    a child's later tokens grow the outputs a caller already holds: exactly those holding a sample
    that had more tokens at the end. Our aggregator copies each child's list as it arrives, and the
    sync front end folds vLLM's native outputs through it too, so only vLLM's own native path on
    AsyncLLM shows it. (How many outputs there are depends on how fast the caller reads: vLLM merges
    the ones it has not taken yet.) A remote path cannot see it: its objects are the client's own.
    """
    if cell.output_kind != "CUMULATIVE" or cell.path != "async native":
        return []
    final = {s.index: len(s.token_ids) for s in cell.run.samples}
    return [k for k, event in enumerate(cell.run.events)
            if any(len(out.token_ids) < final[out.index] for out in event.outputs)]


def findings(cell: qa.Cell) -> list[str]:
    """The rules a healthy cell breaks on the installed stack: vLLM's own, in rule order."""
    return ["no-mutation"] if live_cumulative(cell) else []


def is_finding(cell: qa.Cell, violation) -> bool:
    return violation.rule in findings(cell)


def added(cell: qa.Cell) -> list[str]:
    """The rules a cell breaks beyond the findings above."""
    return sorted({v.rule for v in cell.violations if not is_finding(cell, v)})


@pytest.fixture(scope="module")
def healthy(paths, tmp_path_factory):
    """``app.py qa`` once on the healthy engines: its status, its table, and its JSON file."""
    target = tmp_path_factory.mktemp("qa") / "matrix.json"
    with pytest.MonkeyPatch.context() as monkeypatch:
        status, printed = run_command(["--prompt", PROMPT, "--n", "4", "--seed", str(SEED), "--max-tokens", "4",
                                       "--json", str(target)], paths, monkeypatch)
    return status, printed, qa.Matrix.from_json(target.read_text(encoding="utf-8"))


def test_healthy_engines_hold_every_rule_but_the_findings(healthy):
    status, printed, matrix = healthy
    assert matrix.path_names == ["async wrapper", "async native", "sync wrapper", "sync native"]
    assert matrix.kinds == ["CUMULATIVE", "DELTA", "FINAL_ONLY"]
    assert {c.label: rules(c.violations) for c in matrix.cells} == {c.label: findings(c) for c in matrix.cells}, \
        matrix.report()
    for cell in matrix.cells:  # everything is observable on the embedded engines, but a stop that came too late
        assert [str(u) for u in cell.unchecked] in (
            [], ["accounting: the run meant to be stopped at its first output ended finished before it"]), cell.label
        assert cell.run.mutated_events == live_cumulative(cell), cell.label
        if live_cumulative(cell):
            assert cell.violations[0].message.startswith(
                f"{len(live_cumulative(cell))} of {len(cell.run.events)} outputs changed after they were yielded")
    broken = sum(bool(findings(c)) for c in matrix.cells)
    assert status == (exits.FAILED if broken else exits.OK), printed
    table = printed.split("\n\n")[0].splitlines()
    assert table[0].split() == ["async", "wrapper", "async", "native", "sync", "wrapper", "sync", "native"]
    assert table[4].split() == ["FINAL_ONLY"] + ["✔"] * 4
    assert (f"Verdict: {broken} of 12 cells {'breaks' if broken == 1 else 'break'} a contract rule." if broken else
            "Verdict: every rule holds in all 12 cells.") in printed
    assert all(f" {name}," in printed for name in ("no-mutation", "parent-id", "accounting")), "the rules are listed"
    assert {"no-mutation", "parent-id", "accounting"} <= set(matrix.to_dict()["rules"])


def test_every_real_cell_has_the_right_shape(healthy):
    """Including what the engine reported: vLLM counts each child (n=4 on the first streamed output,
    wrapper and native alike, on AsyncLLM and LLMEngine), every output carries the parent's id, and
    nothing of a run is left in the engine after its end, nor as soon as a stop returns."""
    _, _, matrix = healthy
    for cell in matrix.cells:
        run = cell.run
        assert run is not None and run.status == "finished", cell.label
        assert (run.request["output_kind"], run.request["mode"]) == (cell.output_kind, cell.mode)
        assert [s.index for s in run.samples] == [0, 1, 2, 3]
        assert [s.seed for s in run.samples] == [SEED + i for i in range(4)]
        assert all(s.finish_reason and 0 < len(s.token_ids) <= 4 for s in run.samples), cell.label
        assert [e.finished for e in run.events][-1] and sum(e.finished for e in run.events) == 1
        assert {e.request_id for e in run.events} == {run.request["request_id"]}, cell.label
        counts = [e.engine_requests for e in run.events]
        if cell.output_kind == "FINAL_ONLY":
            assert len(run.events) == 1 and [o.index for o in run.events[0].outputs] == [0, 1, 2, 3]
            assert counts == [0] and cell.stopped is None
        elif cell.path.startswith("sync"):  # LLMEngine: one output per step, so the first holds no finish
            assert len(run.events) > 1, cell.label
            assert counts[0] == 4 and counts[-1] == 0 and max(counts) == 4, f"{cell.label}: {counts}"
            assert cell.stopped.status == "aborted" and cell.in_flight_after_stop == 0, cell.label
        else:  # AsyncLLM merges the outputs its caller has not taken yet: the first may hold finishes
            first = sum(o.finish_reason is not None for o in run.events[0].outputs)
            assert counts[0] == 4 - first and counts[-1] == 0 and max(counts) <= 4, f"{cell.label}: {counts}"
            assert cell.in_flight_after_stop == 0, cell.label
        assert cell.in_flight_at_start == 0 and cell.in_flight_at_end == 0, f"{cell.label} did not run alone"
        assert cell.notes == [], "each streamed cell was held to its path's FINAL_ONLY cell"


def test_analyze_reads_a_matrix_file_cell_by_cell(healthy, tmp_path, capsys):
    """``qa --json``'s file is runs too: ``analyze`` reads every cell's run and names it by its
    cell, so a QA finding can be looked at with the set measures without picking bundles out."""
    from playground.commands import analyze

    _, _, matrix = healthy
    source = tmp_path / "matrix.json"
    source.write_text(matrix.to_json(indent=1), encoding="utf-8")
    assert analyze.main([str(source)]) == exits.OK
    printed = capsys.readouterr()
    lines = printed.out.splitlines()
    assert [line.split(" ", 4)[:4] for line in lines] == [["the", "file,", "cell", c.output_kind] for c in matrix.cells]
    assert all(f"cell {c.label} " in line for c, line in zip(matrix.cells, lines))
    assert "analysed 12 run(s)" in printed.err


def test_real_comparisons_say_what_they_should(healthy):
    """On one engine, wrapper and native and every output_kind give the same tokens (each cell ran
    alone). Across engines they matched too when measured, but that is not promised: if they
    differ, the report must name the token and say the engines differ, not blame a batch."""
    _, printed, matrix = healthy
    for engine in {c.engine for c in matrix.cells}:
        labels = {c.label for c in matrix.cells if c.engine == engine}
        assert any(labels <= set(group) for group in matrix.groups), f"{engine}: {matrix.groups}"
    for comparison in matrix.comparisons:
        assert "ran on different engines" in comparison.batch and comparison.position >= 0
    if len(matrix.groups) == 1:
        assert "all 12 cells that ran gave the same token ids for every sample" in printed
    else:
        assert str(matrix.comparisons[0]) in printed


class BrokenAggregator(aggregate.ParentAggregator):
    """Two deliberate bugs: the first streamed output marks one child finished although it goes on
    (after-finish), and the FINAL_ONLY output lists the samples in reverse order (event-shape)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.popped = 0

    def add(self, index, output):
        child_finished = super().add(index, output)
        if self.output_kind == RequestOutputKind.FINAL_ONLY and self.finished and self._pending is not None:
            self._pending.outputs = list(reversed(self._pending.outputs))
        return child_finished

    def pop(self):
        output = super().pop()
        if output is not None and self.output_kind != RequestOutputKind.FINAL_ONLY and self.popped == 0:
            output.outputs[0] = dataclasses.replace(output.outputs[0], finish_reason="length")
        self.popped += output is not None
        return output


@pytest.mark.slow
def test_a_broken_aggregator_turns_the_right_cells_red(paths, monkeypatch):
    """The sync front end folds vLLM's native per-child outputs through the same aggregator, so sync
    native goes red with the wrappers; async native (vLLM's own ParentRequest) must stay as healthy."""
    monkeypatch.setattr(aggregate, "ParentAggregator", BrokenAggregator)
    request = SampleRequest(prompt=PROMPT, n=4, seed=SEED, max_tokens=6, ignore_eos=True)
    matrix = asyncio.run(qa.run_matrix(request, paths))

    broken = {c.label: added(c) for c in matrix.cells if added(c)}
    # A child marked finished but still running is still counted by the engine: accounting sees it too.
    expected = {f"{kind} × {path}": ["event-shape"] if kind == "FINAL_ONLY" else ["accounting", "after-finish"]
                for kind in matrix.kinds for path in ("async wrapper", "sync wrapper", "sync native")}
    assert broken == expected, matrix.report()
    assert all(not added(matrix.cell(kind, "async native")) for kind in matrix.kinds)
    message = str(matrix.cell("FINAL_ONLY", "sync wrapper").violations[0])
    assert message == ("event-shape: the FINAL_ONLY event holds the samples in order 3, 2, 1, 0, "
                       "expected index order 0..3")
    assert "after it finished in event 0" in matrix.cell("DELTA", "async wrapper").violations[0].message
    assert matrix.cell("DELTA", "sync wrapper").violations[1].message.startswith(
        "event 0 counts 4 requests unfinished in the engine, but only 3 of the run's 4 children were unfinished then")
    assert all(c.alone for c in matrix.cells), "a broken cell must not leave requests running"


@pytest.mark.slow
def test_the_command_exits_1_on_the_broken_aggregator(paths, monkeypatch):
    monkeypatch.setattr(aggregate, "ParentAggregator", BrokenAggregator)
    status, printed = run_command(["--prompt", PROMPT, "--n", "4", "--seed", str(SEED), "--max-tokens", "6",
                                   "--ignore-eos", "--paths", "async"], paths, monkeypatch)
    assert status == exits.FAILED
    rows = {line.split()[0]: line for line in printed.split("\n\n")[0].splitlines()[2:]}
    assert "✖ after-finish: sample" in rows["CUMULATIVE"] and "✖ event-shape" in rows["FINAL_ONLY"]
    assert rows["FINAL_ONLY"].rstrip().endswith("✔"), "async native (the last column) keeps its FINAL_ONLY"
    # The 3 broken wrapper cells, and vLLM's own live CUMULATIVE lists on async native when that cell
    # yielded more than one output (see live_cumulative).
    assert re.search(r"Verdict: [45] of 6 cells break a contract rule\.", printed), printed


class MutatingAggregator(aggregate.ParentAggregator):
    """A deliberate bug: every output it hands out grows the one handed out before it by a token, in
    place, as vLLM's live CUMULATIVE lists do. Shown on DELTA, whose outputs vLLM leaves alone
    (CUMULATIVE cells break no-mutation already, see live_cumulative). The record copies each
    output when it arrives, so only the kept objects change: no other rule can see it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.handed_out = None

    def pop(self):
        output = super().pop()
        if output is not None:
            if self.handed_out is not None:
                self.handed_out.outputs[0].token_ids.append(0)
            self.handed_out = output
        return output


def test_an_aggregator_that_changes_a_handed_out_output_breaks_no_mutation(paths, monkeypatch):
    monkeypatch.setattr(aggregate, "ParentAggregator", MutatingAggregator)
    request = SampleRequest(prompt=PROMPT, n=2, seed=SEED, max_tokens=4, ignore_eos=True)
    matrix = asyncio.run(qa.run_matrix(request, paths, kinds=["DELTA"]))
    assert {c.label: added(c) for c in matrix.cells} == {
        "DELTA × async wrapper": ["no-mutation"], "DELTA × async native": [],
        "DELTA × sync wrapper": ["no-mutation"], "DELTA × sync native": ["no-mutation"]}, matrix.report()
    for cell in matrix.cells:
        if added(cell):  # every output but the last was grown by the next one
            events = len(cell.run.events)
            assert cell.run.mutated_events == list(range(events - 1)), cell.label
            assert cell.violations[0].message.startswith(f"{events - 1} of {events} outputs changed after they were "
                                                         "yielded")


class LeakingAggregator(aggregate.ParentAggregator):
    """A deliberate bug: every output carries the id of the child its first sample came from
    (``f"{i}_{parent}"``), as LLMEngine's step() once did, instead of the parent's."""

    def pop(self):
        output = super().pop()
        if output is not None:
            output.request_id = f"{output.outputs[0].index}_{self.parent_id}"
        return output


def test_an_aggregator_that_leaks_a_child_id_breaks_parent_id(paths, monkeypatch):
    monkeypatch.setattr(aggregate, "ParentAggregator", LeakingAggregator)
    request = SampleRequest(prompt=PROMPT, n=2, seed=SEED, max_tokens=4, ignore_eos=True)
    matrix = asyncio.run(qa.run_matrix(request, paths, kinds=["DELTA", "FINAL_ONLY"]))
    # The sync runner finds a run by its outputs' id (both sync modes merge through the aggregator):
    # a run none reaches ends in an error, not a wait for ever, whether it runs to the end or to a stop.
    lost = ("the sampler finished this request without an output carrying its id (an output came back under "
            "another request id)")
    sync_cells = {f"{kind} × sync {mode}": ["event-count", "status"]
                  for kind in ("DELTA", "FINAL_ONLY") for mode in ("wrapper", "native")}
    assert {c.label: added(c) for c in matrix.cells} == {
        "DELTA × async wrapper": ["parent-id"], "DELTA × async native": [],
        "FINAL_ONLY × async wrapper": ["parent-id"], "FINAL_ONLY × async native": [], **sync_cells}, matrix.report()
    parent = matrix.cell("FINAL_ONLY", "async wrapper").run.request["request_id"]
    assert matrix.cell("FINAL_ONLY", "async wrapper").violations[0].message == (
        f"event 0 carries the request id '0_{parent}', not the parent's '{parent}'")
    for cell in (c for c in matrix.cells if c.label in sync_cells):
        stopped = cell.output_kind == "DELTA"  # FINAL_ONLY has no stop
        runs = [cell.run] + ([cell.stopped] if stopped else [])
        assert [(r.status, r.error, r.events) for r in runs] == [("error", lost, [])] * len(runs), cell.label
        assert (cell.in_flight_at_end, cell.in_flight_after_stop) == (0, 0 if stopped else None), cell.label


def test_a_stop_that_aborts_nothing_breaks_accounting(sync_engine, paths, monkeypatch):
    """LLMEngine's abort made a no-op: a stopped run's children, the wrapper's and vLLM's native ones
    alike, stay in the engine after their caller stopped, and the count after the stop shows them."""
    monkeypatch.setattr(sync_engine, "abort_request", lambda *args, **kwargs: None)
    monkeypatch.setattr(qa, "STOP_WAIT_S", 0.3)  # nobody steps the leaked children: they stay however long
    request = SampleRequest(prompt=PROMPT, n=2, seed=SEED, max_tokens=8, ignore_eos=True)
    for path in paths[2:]:  # sync wrapper, sync native
        matrix = asyncio.run(qa.run_matrix(request, [path], kinds=["DELTA"]))
        (cell,) = matrix.cells
        assert rules(cell.violations) == ["accounting"], matrix.report()
        assert cell.violations[0].message == (
            "after a run of this request was stopped at its first output, the engine still had 2 requests "
            "unfinished as the stop returned, and not 0 within the matrix's wait: the stop did not abort every child")
        while sync_engine.has_unfinished_requests():  # nobody steps the leaked children but us
            sync_engine.step()


# --- the UI tab ----------------------------------------------------------------------------------

def test_the_tab_runs_a_matrix_renders_a_grid_and_a_json_file_and_opens_a_cell(backend, runner, monkeypatch):
    import gradio as gr

    from playground.ui import build_app, qa_tab

    declared, pages = [], []
    declare, connect = qa_tab.declare, qa_tab.connect
    monkeypatch.setattr(qa_tab, "declare", lambda *args: declared.append(declare(*args)) or declared[-1])
    monkeypatch.setattr(qa_tab, "connect", lambda tab, page: pages.append(page) or connect(tab, page))
    demo = build_app(backend, sync_runner=runner)
    (tab,), (page,) = declared, pages
    assert any(b.get("props", {}).get("elem_id") == "tab-qa" for b in demo.config["components"])

    descriptions = []
    settings = dict(prompt=PROMPT, use_chat_template=False, n=2, seed="7", output_kind="DELTA", mode="wrapper",
                    temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, max_tokens=3, presence_penalty=0,
                    frequency_penalty=0, repetition_penalty=1, stop="", logprobs=0, ignore_eos=False)
    action = asyncio.run(qa_tab.begin(tab, page, None, **settings))[page.action]  # the session's action
    grid, report, json_file, matrix = asyncio.run(
        qa_tab.run(tab, page, action, progress=lambda *a, desc=None, **k: descriptions.append(desc)))
    assert not action.going

    # Every cell green but vLLM's own finding (live CUMULATIVE lists on async native), when it shows.
    red = [c.label for c in matrix.cells if not c.ok]
    assert red == [c.label for c in matrix.cells if findings(c)] and len(matrix.cells) == 12, matrix.report()
    assert ("✔ Every contract rule holds in all 12 cells." if not red else
            f"✖ {len(red)} of 12 cells {'breaks' if len(red) == 1 else 'break'} a contract rule.") in report
    assert descriptions[0] == "cell 1 of 12: CUMULATIVE × async wrapper" and len(descriptions) == 12
    assert grid["column_widths"] == ["12%"] + ["22.0%"] * 4
    shown = tab.grid.postprocess(grid["value"])
    assert shown.headers == ["output_kind", "async wrapper", "async native", "sync wrapper", "sync native"]
    assert [row[0] for row in shown.data] == ["CUMULATIVE", "DELTA", "FINAL_ONLY"]
    styles = json.dumps(shown.metadata)
    assert styles.count(qa_tab.GREEN) == 12 - len(red) and styles.count(qa_tab.RED) == len(red)
    assert json_file["interactive"] and json_file["value"].startswith(str(page.export_dir))
    assert qa.Matrix.from_json(Path(json_file["value"]).read_text(encoding="utf-8")).to_dict() == matrix.to_dict()

    from playground.ui.samples_area import SamplesSession

    click = gr.SelectData(None, {"index": [1, 4], "value": "✔"})  # DELTA × sync native
    update = asyncio.run(qa_tab.open_cell(tab, page, matrix, [], SamplesSession(), "QA matrix", click))
    opened = update[page.current]
    assert opened is matrix.cell("DELTA", "sync native").run
    assert json.loads(update[page.samples.html])["id"] == opened.request["request_id"]  # the samples area shows it
    assert update[tab.opened].startswith("Showing **DELTA × sync native** (LLMEngine")
    assert update[page.form["output_kind"]] == "DELTA" and update[page.form["mode"]] == "native"
    assert "its settings are in the form" in update[tab.opened]  # so Run asks for the cell's run again
    assert asyncio.run(qa_tab.open_cell(tab, page, matrix, [], SamplesSession(), "QA matrix",
                                        gr.SelectData(None, {"index": [1, 0], "value": "DELTA"}))) == {}


def test_the_tab_starts_the_sync_engine_on_first_use(backend, runner, monkeypatch):
    import gradio as gr

    from playground.ui import qa_tab

    started = []

    def start(self, model):
        started.append(model)
        self.sync_runner = runner

    monkeypatch.setattr(qa_tab.MatrixPaths, "_start_sync", start)
    with gr.Blocks(), gr.Tabs():
        tab = qa_tab.declare(backend)
    descriptions = []
    paths = asyncio.run(tab.paths.get(lambda *a, desc=None, **k: descriptions.append(desc)))
    assert [p.name for p in paths] == ["async wrapper", "async native", "sync wrapper", "sync native"]
    assert started == [backend.info()["model"]]
    assert descriptions and descriptions[0].startswith("starting the synchronous engine")
    assert asyncio.run(tab.paths.get()) is paths and len(started) == 1, "the engine starts once"


def test_the_tab_refuses_an_empty_prompt_before_it_starts_an_engine(backend, monkeypatch):
    """The first matrix starts a second engine (a minute): a request that cannot run is refused
    first, in the tab's own line, as Run and the sweep refuse it, and no engine starts."""
    import gradio as gr

    from playground.ui import qa_tab

    started = []
    monkeypatch.setattr(qa_tab.MatrixPaths, "_start_sync", lambda self, model: started.append(model))
    with gr.Blocks(), gr.Tabs():
        tab = qa_tab.declare(backend)
    settings = dict(prompt="   ", use_chat_template=False, n=2, seed="7", max_tokens=3)
    assert asyncio.run(qa_tab.begin(tab, None, None, **settings)) == {tab.report: (
        "✖ refused: the prompt is empty: type some text to sample from. Nothing was sent to the engine; change it "
        "and press Run the QA matrix again.")}  # and no action held: the next press starts afresh
    assert started == []


def test_the_matrix_is_the_sessions_action_run_waits_for_it_and_stop_ends_it_between_cells(backend, runner,
                                                                                             monkeypatch):
    """The matrix holds the browser session as a run does: a second press and Run pressed during it
    start nothing (Run says the matrix goes), Stop ends it before its next cell and shows the cells
    that ran (the others marked not run, the JSON ready), and then Run starts; no request is left in
    the engine."""
    from playground.ui import build_app, qa_tab, running
    from playground.ui.samples_area import SamplesSession
    from tests.helpers import wait_until

    declared = []
    declare = qa_tab.declare
    monkeypatch.setattr(qa_tab, "declare", lambda *args: declared.append(declare(*args)) or declared[-1])
    page = build_app(backend, sync_runner=runner).playground_page
    (tab,) = declared
    form = dict(prompt=PROMPT, use_chat_template=False, n=2, seed="7", max_tokens=3)

    async def scenario() -> str:
        queued = (await qa_tab.begin(tab, page, None, **form))[page.action]
        await running.stop(page, queued, [], SamplesSession(), "QA matrix")  # before its follower began: at once
        assert not queued.going
        stopped = await qa_tab.run(tab, page, queued, progress=lambda *a, **k: None)
        assert stopped[1] == "■ The QA matrix was stopped before its first cell."
        second_cell = asyncio.Event()
        update = await qa_tab.begin(tab, page, None, **form)
        action = update[page.action]
        assert action.going and update[tab.report].startswith("⏳ The QA matrix runs one cell at a time")
        assert await qa_tab.begin(tab, page, action, **form) == {tab.report: f"⚠️ {running.BUSY}"}

        def progress(done, desc=None, **k):
            if isinstance(done, tuple) and done[0] >= 1:
                second_cell.set()  # Stop comes while a cell runs, not before the first
        matrix_run = asyncio.create_task(qa_tab.run(tab, page, action, progress=progress))
        await second_cell.wait()
        said = await running.begin(page, action, None, **{**form, "prompt": "Hello"})
        assert "Run started nothing: the QA matrix was going on this page" in said[page.summary], said
        await running.stop(page, action, [], SamplesSession(), "QA matrix")
        assert not action.going and matrix_run.done()
        grid, report, json_file, matrix = matrix_run.result()
        update = await running.begin(page, action, None, **form)
        assert update[page.action].name == "Run"  # the next Run starts
        await update[page.action].stop_and_wait()
        return grid, report, json_file, matrix

    grid, report, json_file, matrix = asyncio.run(scenario())
    ran = re.match(r"\*\*■ Stopped after (\d+) of 12 cells\*\* \(the others are marked not run", report)
    assert ran and 1 <= int(ran[1]) < 12 and len(matrix.cells) == int(ran[1]), report
    assert grid["visible"] and json_file["interactive"]
    assert (matrix.table() == NOT_RUN).to_numpy().sum() == 12 - len(matrix.cells)
    saved = json.loads(Path(json_file["value"]).read_text(encoding="utf-8"))
    assert saved["notes"][0].startswith(f"Stopped after {len(matrix.cells)} of 12 cells")
    assert wait_until(lambda: backend.host.run(backend.num_unfinished()) == 0, 5)


def test_a_remote_server_gets_its_own_green_cells(remote):
    """The matrix's remote paths, on the session's real `vllm serve` (client-side output kinds).
    What a remote path cannot show is said, not passed: no-mutation, parent-id and the per-output
    counts; the server's /metrics still shows it idle after every run and every stop."""
    request = SampleRequest(prompt=PROMPT, n=2, seed=SEED, max_tokens=4)
    matrix = asyncio.run(qa.run_matrix(request, qa.backend_paths(remote, "remote")))
    assert matrix.path_names == ["remote wrapper", "remote native"]
    assert matrix.ok, matrix.report()
    for cell in matrix.cells:
        assert cell.run.engine["output_kind_source"].startswith("client-side")
        assert [s.seed for s in cell.run.samples] == [SEED, SEED + 1]
        assert [u.rule for u in cell.unchecked] == ["no-mutation", "parent-id", "accounting"], cell.label
        assert (cell.in_flight_at_start, cell.in_flight_at_end) == (0, 0), cell.label
        if cell.output_kind != "FINAL_ONLY":  # the server learns of a stop in its own time: idle within the wait
            assert cell.stopped.status == "aborted", cell.label
            assert cell.in_flight_after_stop == 0 or cell.stop_settled_s is not None, cell.label
    report = matrix.report()
    assert "Not checked (the run cannot show it either way):" in report
    assert ("no-mutation on remote wrapper (every output_kind); remote native (every output_kind): the remote path "
            "parses the server's stream into new objects on the client") in report


def test_a_cell_whose_rules_could_not_all_be_checked_never_looks_like_one_that_passed_them_all():
    """Other requests on the engine leave the accounting rule unchecked: the cell says so in its
    mark, and the verdict and the page's headline say how many cells were not fully checked."""
    from playground.qa.rules import Unchecked
    from playground.ui import qa_tab

    whole = qa.Cell("DELTA", "async wrapper", "wrapper", "async")
    partial = qa.Cell("DELTA", "sync wrapper", "wrapper", "sync", unchecked=[
        Unchecked("accounting", "7 requests of others were in flight on the engine when the run started")])
    assert (whole.verdict(), partial.verdict()) == ("✔", "✔ (accounting not checked)")
    matrix = qa.Matrix({"prompt": "p", "n": 2, "seed": 1}, ["DELTA"], [
        {"name": "async wrapper", "mode": "wrapper", "engine": "async"},
        {"name": "sync wrapper", "mode": "wrapper", "engine": "sync"}], [whole, partial])
    assert matrix.ok and matrix.report().endswith("Verdict: no cell breaks a rule; in 1 of 2 cells some could not "
                                                  "be checked (above).")
    assert qa_tab.report(matrix).startswith("**✔ No cell breaks a contract rule; in 1 of 2 cells some could not be "
                                            "checked**")
    assert qa_tab.report(dataclasses.replace(matrix, cells=[whole], paths=matrix.paths[:1])).startswith(
        "**✔ Every contract rule holds in all 1 cells.**")


def test_a_request_that_comes_and_goes_while_a_cell_runs_keeps_it_from_counting_as_alone(backend):
    """Another browser's run that starts after a cell and ends before it leaves the engine's count
    at 0 at the cell's start and end: the count read while the cell runs still sees it, so the cell
    is not called alone, and a comparison or a FINAL_ONLY check that needs it alone is not made on
    its word."""
    from playground.backends.base import record

    path = qa.backend_paths(backend, "async")[0]
    request = SampleRequest(prompt=PROMPT, n=2, seed=3, max_tokens=32, ignore_eos=True, use_chat_template=False)

    async def scenario():
        cell = asyncio.create_task(qa.run_matrix(request, [path], kinds=["DELTA"]))
        while await backend.num_unfinished() < 2:  # the cell's two children are in the engine
            await asyncio.sleep(0.01)
        other = None
        async for other in record(backend, SampleRequest(prompt="Hi", n=1, seed=1, max_tokens=4)):  # noqa: B007
            pass
        return await cell, other

    matrix, other = asyncio.run(scenario())
    (cell,) = matrix.cells
    assert other.status == "finished" and cell.run.status == "finished"
    assert (cell.in_flight_at_start, cell.in_flight_at_end) == (0, 0)  # all the old check could see
    assert cell.others_during >= 1 and not cell.alone, cell.in_flight()
    assert "beside its own while it ran" in cell.in_flight()
    assert qa.Matrix.from_json(matrix.to_json()).cells[0].others_during == cell.others_during
