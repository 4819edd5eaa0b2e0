"""The replay backend: recorded runs of the real engine streamed again through ``record()``.

A replay must give back the run it plays (tokens, texts, logprobs, finish reasons and the events
as the engine yielded them, for every output_kind), keep to its pace without drifting, and end a
stopped replay as the engines end an aborted run. The pacing is checked step by step on a clock
the test moves (``SteppedClock``: the schedule, not the machine's speed), and on the real clock
only for what holds on any machine: no event is emitted before it is due.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses

import gradio as gr
import pytest

from playground.backends.base import plan_request, record
from playground.backends.pace import Clock, Pace
from playground.backends.replay import ReplayBackend, Script
from playground.backends.replay_library import Library
from playground.backends.synthetic import synthetic_run
from playground.errors import InvalidBundle, InvalidRequest, NoEngine
from playground.request import OUTPUT_KINDS, SETTINGS, SampleRequest
from playground.run import Run
from playground.ui.markdown import plain
from tests.helpers import record_to_end


class SteppedClock(Clock):
    """A clock the test moves: a wait moves it to the wait's end (or, with ``stop_at``, stops the
    replay there), and the consumer may spend time by moving it itself."""

    def __init__(self, backend_of=None, stop_at: float | None = None):
        self.t = 1000.0
        self.stop_at = stop_at
        self.backend_of = backend_of
        self.request_id: str | None = None

    def now(self) -> float:
        return self.t

    async def wait(self, stop: asyncio.Future, seconds: float) -> None:
        if self.stop_at is not None and self.t + seconds > self.stop_at:
            self.t = max(self.t, self.stop_at)
            await self.backend_of().abort(self.request_id)
            await asyncio.sleep(0)  # the abort lands on this loop's next turn
            return
        self.t += seconds


def replay_of(run: Run, pace: str = "x1000", **kwargs) -> Run:
    return record_to_end(ReplayBackend.of([run], Pace.parse(pace), **kwargs), SampleRequest("any prompt"))


# --- the pace, alone -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, label", [(None, "recorded"), ("recorded", "recorded"), ("x1", "recorded"),
                                         ("x4", "x4"), ("4x", "x4"), ("×0.5", "x0.5"), ("10000 tok/s", "10000 tok/s"),
                                         ("250tok/s", "250 tok/s"), ("1000000 tok/s", "1000000 tok/s"),
                                         ("x2000.5", "x2000.5")])
def test_a_pace_reads_as_a_person_writes_it(text, label):
    assert Pace.parse(text).label == label
    assert Pace.parse(Pace.parse(text).label) == Pace.parse(text)  # a replay's record names its pace so


@pytest.mark.parametrize("text, says", [("fast", "got 'fast'"), ("x0", "above 0"), ("-3 tok/s", "got '-3 tok/s'"),
                                        ("x20000", "at most"), ("tok/s", "got 'tok/s'")])
def test_a_bad_pace_is_refused_with_a_sentence(text, says):
    with pytest.raises(InvalidRequest, match="pace|speed-up|rate") as refused:
        Pace.parse(text)
    assert says in str(refused.value)


def test_the_schedule_scales_recorded_times_or_spreads_tokens_at_the_rate():
    times, tokens = [0.5, 1.0, 1.0, 2.0], [4, 4, 0, 8]
    assert Pace().due(times, tokens) == [0.5, 1.0, 1.0, 2.0]
    assert Pace.parse("x4").due(times, tokens) == [0.125, 0.25, 0.25, 0.5]
    assert Pace.parse("8 tok/s").due(times, tokens) == [0.5, 1.0, 1.0, 2.0]  # 4, 8, 8 and 16 tokens made by then
    assert Pace.parse("x2").due([0.0, 3.0, 2.0], [1, 1, 1]) == [0.0, 1.5, 1.5]  # never back in time


# --- pacing, step by step --------------------------------------------------------------------------

def test_a_replay_that_falls_behind_emits_what_is_due_at_once_and_then_keeps_its_schedule():
    """Event k is due at start + due[k] whatever came before: a consumer that holds the replay up
    for three steps gets the events due meanwhile at once, and the next ones at their own times."""
    source = synthetic_run(4, 10, step_s=0.1, first_s=0.1, events=True)
    clock = SteppedClock()
    backend = ReplayBackend.of([source], Pace.parse("x2"), clock=clock)

    async def emitted() -> list[float]:
        prepared = await plan_request(backend, SampleRequest("anything"))
        stamps = []
        async for observation in backend.stream(prepared):
            if observation.event is not None:
                stamps.append(observation.event.t)
                if len(stamps) == 3:
                    clock.t += 0.15  # the consumer spends three steps' time (x2: 0.05 s a step)
        return stamps

    began = clock.t
    stamps = [round(t - began, 6) for t in asyncio.run(emitted())]
    due = [round(d, 6) for d in Pace.parse("x2").due(*_times_and_tokens(source))]
    assert due == [round(0.05 * (k + 1), 6) for k in range(10)]
    assert stamps[:3] == due[:3]
    assert stamps[3:6] == [0.3, 0.3, 0.3]  # due at 0.20, 0.25, 0.30: all emitted when the consumer came back
    assert stamps[6:] == due[6:]  # then on schedule again: the stall did not push the rest back


def _times_and_tokens(run: Run) -> tuple[list[float], list[int]]:
    script = Script.of(run)
    return script.times, script.tokens


# --- bad input -----------------------------------------------------------------------------------

def test_files_that_cannot_be_replayed_are_refused_with_a_sentence(tmp_path):
    batch_input = tmp_path / "prompts.jsonl"
    batch_input.write_text('{"prompt": "hello", "n": 2}\n')
    with pytest.raises(InvalidBundle, match="line 1: this is not a run bundle"):
        Library.read([str(batch_input)])
    built = synthetic_run(2, 3)  # samples, but no events: nothing was streamed
    saved = tmp_path / "built.json"
    saved.write_text(built.to_json(indent=1))
    with pytest.raises(InvalidBundle, match="its run: it has no events"):
        Library.read([str(saved)])
    with pytest.raises(InvalidBundle, match="no run to replay"):
        Library([])
    with pytest.raises(InvalidBundle, match="synthetic:0x5: a synthetic run has 1 to"):
        Library.read(["synthetic:0x5"])
    with pytest.raises(InvalidBundle, match="synthetic:2x3:21: a synthetic run has the top 0 to 20 logprobs"):
        Library.read(["synthetic:2x3:21"])


def test_a_synthetic_run_has_the_top_k_logprobs_its_source_names():
    """``synthetic:NxT`` has the top-5 (what the GPU-pace bench measured first), ``:0`` none, ``:K``
    the top K: the bench measures the app at a GPU's pace with and without logprobs."""
    usual, plain, top2 = Library.read(["synthetic:2x3", "synthetic:2x3:0", "synthetic:2x3:2"]).runs
    assert usual.request["logprobs"] == 5 and all(len(s.logprobs[0].top) == 5 for s in usual.samples)
    assert plain.request["logprobs"] is None and all(s.logprobs is None for s in plain.samples)
    assert top2.request["logprobs"] == 2 and all(len(s.logprobs[0].top) == 2 for s in top2.samples)


def test_app_replay_refuses_a_bad_file_or_pace_before_serving(tmp_path, capsys):
    from tests.session_start import STARTING

    STARTING.imports()  # vLLM's parser imports from transformers: not while the engines' thread does
    from playground.commands import serve

    bad = tmp_path / "notes.txt"
    bad.write_text("not json at all\n")
    for argv, says in ((["--replay", str(bad)], "--replay: notes.txt, line 1: not valid JSON"),
                       (["--replay", "synthetic:2x3", "--replay-pace", "soon"], "the replay's pace must be")):
        with pytest.raises(SystemExit) as ended:
            serve.main(argv)
        assert ended.value.code == 2
        assert says in capsys.readouterr().err


# --- real runs, replayed -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def recorded(backend) -> dict[tuple[str, str], Run]:
    """One real run per output_kind and fan-out (n=3, 10 tokens, top-2 logprobs)."""
    runs = {}
    for kind in OUTPUT_KINDS:
        for mode in ("wrapper", "native"):
            request = SampleRequest("The lighthouse keeper", n=3, seed=11, max_tokens=10, output_kind=kind,
                                    mode=mode, logprobs=2, use_chat_template=False, temperature=1.2)
            runs[kind, mode] = record_to_end(backend, request)
    return runs


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
@pytest.mark.parametrize("mode", ["wrapper", "native"])
def test_a_replay_gives_back_the_run_it_plays(recorded, kind, mode):
    source = recorded[kind, mode]
    replay = replay_of(source)
    assert replay.status == "finished" and replay.n == source.n
    assert replay.request["replay"] == {"of": source.request["request_id"], "pace": "x1000",
                                        "note": "the file has no run of this prompt: its next run plays"}
    assert replay.request["request_id"] != source.request["request_id"]
    assert {k: replay.request.get(k) for k in SETTINGS} == {k: source.request.get(k) for k in SETTINGS}
    assert replay.request["prompt_token_ids"] == source.request["prompt_token_ids"]
    for mine, theirs in zip(replay.samples, source.samples, strict=True):
        assert (mine.seed, mine.token_ids, mine.token_texts, mine.text, mine.finish_reason, mine.stop_reason) == \
            (theirs.seed, theirs.token_ids, theirs.token_texts, theirs.text, theirs.finish_reason, theirs.stop_reason)
        assert mine.logprobs == theirs.logprobs and mine.num_cached_tokens == theirs.num_cached_tokens
        assert (mine.prefill_s is None) == (theirs.prefill_s is None)  # the engine's phases, on the replay's clock
    assert [(e.finished, e.num_cached_tokens, e.engine_requests,
             [(o.index, o.text, o.token_ids, o.finish_reason) for o in e.outputs]) for e in replay.events] == \
        [(e.finished, e.num_cached_tokens, e.engine_requests,
          [(o.index, o.text, o.token_ids, o.finish_reason) for o in e.outputs]) for e in source.events]
    assert {e.request_id for e in replay.events} == {replay.request["request_id"]}
    assert replay.engine == source.engine, "its record names the engine that made the tokens it plays"


def test_a_replay_of_a_replay_names_the_run_that_sampled_its_tokens(recorded):
    """Its record says which run it plays and which sampled the tokens; no view takes the two
    replays for draws that share seeds, and its line says whose tokens they are."""
    from playground import analysis

    source = recorded["DELTA", "wrapper"]
    first = replay_of(source)
    second = replay_of(first)
    assert second.request["replay"]["of"] == first.request["request_id"]
    assert second.request["replay"]["sampled"] == source.request["request_id"]
    assert replay_of(second).request["replay"]["sampled"] == source.request["request_id"]
    assert analysis.seed_overlaps([first, second]) == [] and analysis.seed_overlaps([source, second]) == []
    assert f"itself a replay of {source.request['request_id']}" in analysis.origin_label(second)
    assert f"are {source.request['request_id']}'s" in analysis.origin_note(second)
    assert [s.token_ids for s in second.samples] == [s.token_ids for s in source.samples]
    stopped = copy.deepcopy(source)
    stopped.status = "aborted"  # a run the person stopped: its replay ends where it did, Stop or no Stop
    said = replay_of(stopped).request["replay"]
    assert said["stopped"] is True and "sampled" not in said
    assert "was stopped: the replay ends where it did" in analysis.origin_label(replay_of(stopped))
    assert "stopped" not in first.request["replay"]


def test_a_replay_keeps_its_pace_and_no_event_comes_before_its_time(recorded):
    """On the real clock, what holds on any machine: each event of the replay's own record comes
    at or after the time its pace gives it (how late is a figure of the benchmark, not a test)."""
    source = recorded["DELTA", "wrapper"]
    for pace in ("x3", "400 tok/s"):
        replay = replay_of(source, pace)
        due = Pace.parse(pace).due(*_times_and_tokens(source))
        assert [e.t >= d for e, d in zip(replay.events, due, strict=True)] == [True] * len(due)
        made = 0
        for event in replay.events:
            made += sum(len(o.token_ids) for o in event.outputs)
            assert pace != "400 tok/s" or made / event.t <= 400  # never ahead of the rate asked for
        assert replay.request["replay"]["pace"] == pace


@pytest.fixture(scope="module")
def long_runs(backend) -> dict[str, Run]:
    """Runs long enough to stop in the middle (n=3 x 16 tokens)."""
    return {kind: record_to_end(backend, SampleRequest("Write a story about the sea.", n=3, seed=5, max_tokens=16,
                                                       ignore_eos=True, output_kind=kind, logprobs=1,
                                                       use_chat_template=False))
            for kind in OUTPUT_KINDS}


@pytest.mark.parametrize("kind", ["DELTA", "CUMULATIVE"])
def test_stop_mid_replay_keeps_each_samples_tokens_so_far_with_finish_reason_abort(long_runs, kind):
    source = long_runs[kind]
    backend = ReplayBackend.of([source], Pace.parse("x2"))

    async def stopped_after(events: int) -> tuple[Run, int]:
        run = None
        async for run in record(backend, SampleRequest("anything")):
            if len(run.events) == events:
                await backend.abort(run.request["request_id"])
                await backend.abort(run.request["request_id"])  # twice: the second is ignored
        return run, await backend.num_unfinished()

    run, left = asyncio.run(stopped_after(4))
    assert left == 0 and run.status == "aborted"
    assert run.events[-1].finished and {o.finish_reason for o in run.events[-1].outputs} == {"abort"}
    assert len(run.events) == 5  # four events, then the abort's one output
    for mine, theirs in zip(run.samples, source.samples):
        assert 0 < len(mine.token_ids) < len(theirs.token_ids), (len(mine.token_ids), len(theirs.token_ids))
        assert mine.token_ids == theirs.token_ids[:len(mine.token_ids)]
        assert mine.token_texts == theirs.token_texts[:len(mine.token_ids)]
        assert mine.logprobs == theirs.logprobs[:len(mine.token_ids)]
        assert mine.finish_reason == "abort"


def test_stop_mid_replay_of_final_only_gives_all_n_as_the_engine_had_made_them(long_runs):
    """FINAL_ONLY yields one output at the end: a stop in the middle gives all n, each with the
    tokens its recorded engine phases say were made by then, finish_reason abort."""
    source = long_runs["FINAL_ONLY"]  # the wrapper's: each child's engine phases are recorded
    clock = SteppedClock(lambda: backend)
    backend = ReplayBackend.of([source], clock=clock)
    middle = source.samples[0].queued_at + source.samples[0].queued_s + source.samples[0].prefill_s \
        + source.samples[0].decode_s / 2
    clock.stop_at = clock.t + middle

    async def replayed() -> Run:
        run = None
        async for run in record(backend, SampleRequest("anything")):
            clock.request_id = run.request["request_id"]
        return run

    run = asyncio.run(replayed())
    assert run.status == "aborted" and len(run.events) == 1 and run.events[0].finished
    assert [o.index for o in run.events[0].outputs] == list(range(source.n))
    for mine, theirs in zip(run.samples, source.samples):
        assert 0 < len(mine.token_ids) < len(theirs.token_ids)
        assert mine.token_ids == theirs.token_ids[:len(mine.token_ids)] and mine.finish_reason == "abort"
        assert mine.logprobs == theirs.logprobs[:len(mine.token_ids)]


def test_a_replay_chooses_the_run_of_the_prompt_closest_to_the_request(recorded):
    wrapper, native = recorded["DELTA", "wrapper"], recorded["DELTA", "native"]
    backend = ReplayBackend.of([wrapper, native, recorded["CUMULATIVE", "native"]])
    asked = SampleRequest("The lighthouse keeper", n=3, seed=11, max_tokens=10, output_kind="DELTA", mode="native",
                          logprobs=2, temperature=1.2)
    assert backend.resolve(asked, None)[1]["replay"] == {"of": native.request["request_id"], "pace": "recorded"}
    asked.n = 5
    said = backend.resolve(asked, None)[1]["replay"]
    assert said["of"] == native.request["request_id"] and "it differs in n" in said["note"]
    with pytest.raises(NoEngine, match="has no engine: a branch needs one") as refused:
        backend.resolve(asked, {"branch": {"run": "run-x"}})
    from playground.ui.running import refused as said  # for good: no "press Branch again once it answers"
    assert said(refused.value, "Branch") == f"✖ refused: {plain(refused.value)}."
    # A prompt no run has plays the file's next run after the one the asking page shows, else its first:
    # each page steps through the file from its own place, and no page moves another's.
    other = dataclasses.replace(asked, prompt="Count to three.")
    played, after = [], None
    for _ in range(4):
        played.append(backend.resolve(other, None, after)[1]["replay"]["of"])
        after = played[-1]
    ids = [run.request["request_id"] for run in (wrapper, native, recorded["CUMULATIVE", "native"])]
    assert played == [*ids, ids[0]]
    assert backend.resolve(other, None)[1]["replay"]["of"] == ids[0], "a page that shows nothing starts at the first"
    # A setting the record leaves out is the schema's default, as the form shows it: no difference.
    bare = synthetic_run(3, 4, seed=5, events=True)
    assert "temperature" not in bare.request
    chosen, why = ReplayBackend.of([bare]).library.choose(SampleRequest.from_record(bare.request))
    assert chosen is bare and why is None


def test_a_replay_pages_run_plays_the_next_run_for_no_prompt_and_the_form_shows_what_plays(recorded):
    """On a replay page Run never meets an empty-prompt refusal: the file's next run plays, and the
    form takes the settings of the run that plays (a prompt the file lacks gets them too), so what
    is on screen never stands under another prompt."""
    from playground.ui import build_app, running

    source = recorded["DELTA", "wrapper"]
    page = build_app(ReplayBackend.of([source])).playground_page
    untouched = {name: control.value for name, control in page.form.items()}
    for prompt, why in (("", "no prompt was given"), ("Something else entirely", "the file has no run of this prompt")):
        update = asyncio.run(running.begin(page, None, **{**untouched, "prompt": prompt}))
        action = update[page.action]
        assert action is not None and "refused" not in update[page.summary], update[page.summary]
        assert why in action.runs[0].prepared.labels["replay"]["note"]
        assert update[page.form["prompt"]] == source.request["prompt"] and update[page.form["n"]] == source.n
        assert update[page.form["seed"]] == str(source.request["seed"])
    # The next Run with no prompt plays the run after the one on screen: this page's own place in the file.
    two = ReplayBackend.of([source, recorded["CUMULATIVE", "native"]])
    page = build_app(two).playground_page
    update = asyncio.run(running.begin(page, None, recorded["CUMULATIVE", "native"], **{**untouched, "prompt": ""}))
    assert update[page.action].runs[0].prepared.labels["replay"]["of"] == source.request["request_id"]
    assert "after" not in update[page.action].runs[0].prepared.labels, "the page's place is never recorded"
    # The QA matrix needs an engine: refused in its line as a branch is, nothing stored, no red toast.
    from playground.ui import qa_tab

    with gr.Blocks():
        tab = qa_tab.declare(two)
    said = asyncio.run(qa_tab.begin(tab, page, None, **untouched))
    assert said == {tab.report: "✖ refused: " + plain(two.no_engine("the QA matrix")) + "."}, said


def test_a_replay_says_its_engine_counts_are_the_recorded_runs():
    """The summary's count of requests in the engine, while a replay streams, is the recording's:
    no engine holds a replay's children."""
    from playground.run import Event
    from playground.ui.views import engine_requests_note

    run = synthetic_run(2, 3, seed=1)
    run.status, run.samples[0].finish_reason, run.samples[1].finish_reason = "running", None, None
    run.events.append(Event(t=0.1, finished=False, outputs=[], engine_requests=2))
    assert engine_requests_note(run) == " · 1 parent → 2 child requests · 2 requests in the engine now"
    run.samples[1].finish_reason = "stop"  # one child left the engine: the other request is another run's
    assert engine_requests_note(run).endswith("2 requests in the engine now (1 from other runs)")
    run.request["replay"] = {"of": "run-1234"}
    assert "2 requests in the engine at this point when it was recorded" in engine_requests_note(run)


def test_a_replays_timing_charts_say_whose_times_they_show():
    """A replay's times are its own (at its pace), and its per-child phases the recording's:
    each chart says so under its title, and a run that is no replay says nothing of it."""
    from playground import analysis

    run = synthetic_run(2, 3, seed=1)
    figures = (analysis.tokens_over_time_figure, analysis.ttft_figure, analysis.itl_figure)
    assert not any("replay" in f(run).layout.title.text for f in figures)
    run.request["replay"] = {"of": "run-1234", "pace": "x4"}
    for figure in figures:
        assert "⟲ a replay of run-1234: the times are the replay's" in figure(run).layout.title.text


def test_every_view_of_a_replay_and_its_report_say_it_is_one():
    """Each tab's panel (its figures under their titles, the Diff's and the Inspector's text) and
    the report name the run a replay, and a run that is none says nothing of it. The panels are
    driven as the page drives them, by name (any key stands in for a component)."""
    from playground import analysis
    from playground.ui import panels
    from playground.ui.panels import Panel

    def shown(run: Run) -> list[str]:
        texts = []
        for values in (panels.diff, panels.tree, panels.timing, panels.logprobs, panels.inspector):
            names = values(run)
            for value in Panel(values, {name: name for name in names}).show(run).values():
                if hasattr(value, "layout"):
                    texts.append(value.layout.title.text or "")
                elif isinstance(value, str):
                    texts.append(value)
        return texts

    run = synthetic_run(3, 6, seed=1, events=True)
    assert not any("replay" in text for text in shown(run))
    run.request["replay"] = {"of": "run-1234", "pace": "x4"}
    texts = shown(run)
    figures = [t for t in texts if t.startswith(("Divergence", "Per-token", "Agreement", "Raw events", "Pairwise"))]
    assert len(figures) >= 4 and all("⟲" in t and "run-1234" in t for t in figures), figures
    assert sum("⟲ A replay of run-1234" in t for t in texts if not t.startswith(("Divergence", "Per-token"))) >= 2
    report = analysis.run_report(run)
    assert report.count("A replay of run-1234") >= 5  # the request section and every chart


def test_the_diff_says_which_picked_samples_it_left_out_and_the_timing_table_its_units():
    from playground.ui import panels

    run = synthetic_run(4, 6, seed=1, events=True)
    view = panels.diff_view(run, 0, "0-2, 40, x")
    assert ("Of the samples listed: 40 left out (past sample 3, or not a number); x left out (past sample 3, "
            "or not a number).") in view
    assert "Of the samples listed" not in panels.diff_view(run, 0, "1, 3")
    assert "Showing the 2 of the 4 samples listed above." in panels.diff_view(run, 0, "1, 3")
    columns = list(panels.timing(run)["table"].columns)
    assert "ttft (s)" in columns and "total time (s)" in columns and "ttft" not in columns


def test_the_diff_lists_the_references_identical_copies_right_after_it():
    """The reference first, then the samples identical to it, then the rest in the tree's order:
    a sample that parts from it at once is not set between it and its copies."""
    import re

    from playground.ui import panels

    run = synthetic_run(5, 6, seed=1)
    for k in (3, 4):
        run.samples[k] = dataclasses.replace(run.samples[0], index=k, seed=run.samples[k].seed)
    assert all(run.samples[k].token_ids != run.samples[0].token_ids for k in (1, 2))
    rows = [int(i) for i in re.findall(r"id='diff-sample-(\d+)'", panels.diff_view(run, 0))]
    assert rows[:3] == [0, 3, 4] and sorted(rows) == list(range(5))
    assert [int(i) for i in re.findall(r"id='diff-sample-(\d+)'", panels.diff_view(run, 3))][:3] == [3, 0, 4]


def test_historys_replay_plays_the_saved_run_picked_when_the_sessions_list_has_none(recorded, tmp_path):
    """After a reload the session's list is empty and the saved runs are not: Replay plays the saved
    run picked; with neither picked it says where to pick one."""
    from playground.store import RunStore
    from playground.ui import build_app, replay_action

    source = recorded["CUMULATIVE", "wrapper"]
    rid = source.request["request_id"]
    with RunStore(tmp_path / "runs.sqlite3") as store:
        store.save("owner-1", rid, source.request["prompt"], source.status, source.n, source.to_json())
        key = store.key_of("owner-1", rid)
        page = build_app(ReplayBackend.of([source])).playground_page
        with gr.Blocks():
            controls = replay_action.declare()
        update = asyncio.run(replay_action.begin(page, controls, None, [], None, "x1000", key, store=store))
        assert update[page.action].runs[0].prepared.labels["replay"]["of"] == rid, update.get(controls.note)
        nothing = asyncio.run(replay_action.begin(page, controls, None, [], None, "x1000", None, store=store))
        assert nothing == {controls.note: "⚠️ Pick a run first, in this session's list or among the saved runs: "
                                          "Replay streams it again."}
        gone = asyncio.run(replay_action.begin(page, controls, None, [], None, "x1000", "no-such-key", store=store))
        assert "no longer in the store" in gone[controls.note]
