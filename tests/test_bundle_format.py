"""The bundle (version 4) on runs shaped like the engine's, built without an engine: each sample is
written plainly, each bundle loads back to the run written, costs at most 60 bytes per sampled
token, older versions still load, and damage is named."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from playground import bundle_format
from playground.backends.recorder import Observation, RunRecorder
from playground.backends.synthetic import synthetic_run
from playground.bundle_format import bundle_bytes_per_token
from playground.bundles import parse_bundles, read_runs
from playground.errors import InvalidBundle
from playground.logprobs import Logprobs
from playground.run import BUNDLE_VERSION, Event, EventOutput, Run, Sample, TokenLogprob

KINDS = ("CUMULATIVE", "DELTA", "FINAL_ONLY")
DATA = Path(__file__).resolve().parent / "data"
STOP = "END"
# Token id -> bytes, as a byte-level tokenizer has them: words with a leading space, the two
# halves of 'é' (a piece ends inside the character), and " E" + "ND", which spell the stop string.
HALVES, E, ND = (3, 4), 5, 6
VOCAB = {1: b"\n", 2: b".", 3: b"\xc3", 4: b"\xa9", E: b" E", ND: b"ND"}
_syllables = ["ta", "ro", "mi", "sen", "ka", "lu", "ve", "dor", "pi", "an"]
# 3000 words with ids spread over a vocabulary of 150k, as a real tokenizer's are.
VOCAB.update({100 + 50 * k: (" " + _syllables[k % 10] + _syllables[k // 10 % 10] * (k % 3)).encode()
              for k in range(3000)})
WORDS = sorted(VOCAB)


def decode(ids: list[int]) -> str:
    return b"".join(VOCAB[t] for t in ids).decode("utf-8", errors="replace")


def engine_text(ids: list[int], stopped: bool) -> str:
    """The text a detokenizer yields so far: an unfinished character held back, a stop string
    and what follows cut off."""
    text = decode(ids).removesuffix("\ufffd")
    return text[:text.rindex(STOP)] if stopped else text


def logprobs_of(rng: random.Random, token_id: int, k: int) -> TokenLogprob:
    """Top-k alternatives by rank with float32 logprobs, as vLLM gives them; the sampled token
    is among them, or after them with its own rank."""
    values = sorted((float(np.float32(-rng.expovariate(0.7))) for _ in range(k + 1)), reverse=True)
    others = [t for t in rng.sample(WORDS, k + 1) if t != token_id][:k]
    ids = list(others)
    rank = rng.randint(1, k) if rng.random() < 0.7 else rng.randint(k + 1, 60)
    if rank <= k:
        ids[rank - 1] = token_id
    else:
        ids.append(token_id)
    top = [(t, values[place], decode([t])) for place, t in enumerate(ids)]
    chosen = top[ids.index(token_id)]
    return TokenLogprob(token_id, chosen[1], rank, chosen[2], top)


def generated_run(kind: str, n: int = 128, tokens: int = 96, logprobs: int = 0, seed: int = 0,
                  alone: bool = False) -> Run:
    """The run a wrapper run of ``kind`` records: each step a random subset of the unfinished
    samples gets one token, their outputs merged into one to three events (``alone``: an event
    each, as the remote backend yields them); some samples finish early on EOS or on the stop
    string (its CUMULATIVE text then shrinks), the rest at length."""
    rng = random.Random(seed)
    request = {"prompt": "Tell me a story:", "rendered_prompt": "Tell me a story:", "n": n, "seed": seed,
               "output_kind": kind, "mode": "wrapper", "temperature": 1.0, "max_tokens": tokens, "stop": [STOP],
               "logprobs": logprobs or None, "request_id": "run-gen", "prompt_token_ids": [1, 2, 3, 4, 5]}
    recorder = RunRecorder(request, [seed + i for i in range(n)], engine={"conditions": {"dtype": "float32"}},
                           decode=decode)
    t0 = recorder.t0
    ends = {}
    for i in range(n):
        early = rng.random()
        ends[i] = (rng.randint(tokens // 3, tokens - 1), "eos") if early < 0.15 else \
            (rng.randint(tokens // 3, tokens - 1), "stop") if early < 0.25 else (tokens, "length")
    ids: list[list[int]] = [[] for _ in range(n)]
    sent = [""] * n
    lps: list[list[TokenLogprob]] = [[] for _ in range(n)]
    unfinished, step, outputs_at_end = set(range(n)), 0, []
    while unfinished:
        step += 1
        advancing = [i for i in sorted(unfinished) if rng.random() < 0.85]
        rng.shuffle(advancing)
        cuts = sorted(rng.sample(range(1, len(advancing)), min(rng.randint(0, 2), max(len(advancing) - 1, 0))))
        for part, group in enumerate([[i] for i in advancing] if alone else _split(advancing, cuts)):
            outputs, new_lps = [], {}
            for i in sorted(group):
                end, how = ends[i]
                if how == "stop" and len(ids[i]) == end - 2:
                    token = E
                elif how == "stop" and len(ids[i]) == end - 1:
                    token = ND
                elif ids[i] and ids[i][-1] == HALVES[0]:
                    token = HALVES[1]
                else:
                    common = WORDS[:500] if rng.random() < .7 else WORDS
                    token = HALVES[0] if rng.random() < 0.02 else rng.choice(common)
                ids[i].append(token)
                done = len(ids[i]) >= end and ids[i][-1] != HALVES[0]
                text = engine_text(ids[i], done and how == "stop")
                finish = ("stop" if how in ("eos", "stop") else "length") if done else None
                stop_reason = STOP if done and how == "stop" else None
                if logprobs:
                    lps[i].append(logprobs_of(rng, token, logprobs))
                if kind == "DELTA":
                    delta = text[len(sent[i]):] if text.startswith(sent[i]) else ""
                    outputs.append(EventOutput(i, delta, [token], finish, stop_reason))
                    new_lps[i] = lps[i][-1:]
                else:
                    outputs.append(EventOutput(i, text, list(ids[i]), finish, stop_reason))
                    new_lps[i] = list(lps[i])
                sent[i] = text
                if done:
                    unfinished.discard(i)
            t = t0 + 0.0731 * step + 0.0043 * part + rng.random() * 1e-4
            metrics = {i: {"queued_ts": t0 + 0.001, "scheduled_ts": t0 + 0.002, "first_token_ts": t0 + 0.07,
                           "last_token_ts": t - 1e-4, "num_generation_tokens": len(ids[i])}
                       for i in group if i not in unfinished}
            if kind == "FINAL_ONLY":
                outputs_at_end += outputs
                for i, facts in metrics.items():
                    recorder.observe(Observation(metrics={i: facts}))
                continue
            event = Event(t, not unfinished, outputs, num_cached_tokens=0, request_id="run-gen",
                          engine_requests=len(unfinished) + len(metrics))
            recorder.observe(Observation(event=event, logprobs=new_lps if logprobs else {}, metrics=metrics))
    if kind == "FINAL_ONLY":
        last = {o.index: o for o in outputs_at_end}
        event = Event(t0 + 0.0731 * (step + 1), True, [last[i] for i in range(n)], num_cached_tokens=0,
                      request_id="run-gen", engine_requests=0)
        recorder.observe(Observation(event=event, logprobs={i: lps[i] for i in range(n)} if logprobs else {}))
    return recorder.finish()


def _split(items: list, cuts: list[int]) -> list[list]:
    bounds = [0, *cuts, len(items)]
    return [items[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def tokens(run: Run) -> int:
    return sum(len(s.token_ids) for s in run.samples)


def assert_same(again: Run, run: Run) -> None:
    assert again.events == run.events  # event by event, field by field
    assert again.samples == run.samples
    assert again == run
    assert again.to_dict() == run.to_dict()


# ---- round trips -------------------------------------------------------------------------------

@pytest.mark.parametrize("logprobs", [0, 5])
@pytest.mark.parametrize("kind", KINDS)
def test_every_output_kind_loads_back_as_it_was_written(kind, logprobs):
    run = generated_run(kind, n=12, tokens=30, logprobs=logprobs, seed=3)
    assert any(s.finish_reason == "stop" and s.stop_reason == STOP for s in run.samples)
    text = run.to_json()
    data = json.loads(text)
    assert text.startswith('{"bundle_version":5,"request":{"prompt":"Tell me a story:",') and "\n" not in text
    assert data["bundle_version"] == BUNDLE_VERSION == 5
    for s, written in zip(run.samples, data["samples"]):  # plain, for a reader without this project
        assert {name: written[name] for name in bundle_format.PLAIN} == {
            "index": s.index, "seed": s.seed, "text": s.text, "token_ids": s.token_ids,
            "finish_reason": s.finish_reason, "stop_reason": s.stop_reason}
        assert "token_times" not in written  # the events give them
    assert_same(Run.from_json(text), run)
    indented = run.to_json(indent=1)  # the page's export: a field, an event or a sample per line
    assert len(indented.splitlines()) == 2 + len(data) + 2 + len(run.events) + run.n
    assert Run.from_json(indented) == run and len(indented) < 1.1 * len(text) + 1000


def test_a_cumulative_text_cut_by_a_stop_string_is_the_samples_own():
    run = generated_run("CUMULATIVE", n=12, tokens=30, seed=3)
    cut = [o for e in run.events for o in e.outputs if o.stop_reason == STOP]
    assert cut and all(STOP not in o.text for o in cut)
    data = run.to_dict()
    wholes = [o for e in data["events"] for o in e[1] if isinstance(o, list) and len(o) > 2 and isinstance(o[2], list)]
    assert len(wholes) == len(cut) and all(o[2] == [] and o[4] == STOP for o in wholes), wholes
    assert Run.from_dict(json.loads(json.dumps(data))).events == run.events


def test_an_event_holds_how_many_of_its_samples_tokens_each_output_brought():
    for kind in ("CUMULATIVE", "DELTA"):
        run = generated_run(kind, n=4, tokens=12, seed=1)
        data = run.to_dict()
        assert sum(o[1] for e in data["events"] for o in e[1]) == tokens(run)
        facts = [e[2] if len(e) == 3 else {} for e in data["events"]]
        assert facts[0] == {"num_cached_tokens": 0, "engine_requests": 4}, "the request id is the run's"
        assert all(set(f) <= {"finished", "engine_requests"} for f in facts[1:]), "the rest as the event before"
        assert facts[-1]["finished"] is True and sum("finished" in f for f in facts) == 1


def test_an_output_that_is_not_its_samples_tokens_is_written_whole():
    run = generated_run("CUMULATIVE", n=3, tokens=8, seed=2)
    odd = run.events[2].outputs[0]
    odd.token_ids = [99999, *odd.token_ids[1:]]  # as a QA finding would record it: not the sample's
    data = run.to_dict()
    assert data["events"][2][1][0] == {name: getattr(odd, name) for name in bundle_format.OUTPUT_FIELDS}
    assert_same(Run.from_json(run.to_json()), run)


def test_a_run_built_by_hand_keeps_what_its_events_do_not_say():
    run = Run(request={"n": 2, "output_kind": "DELTA", "request_id": "r"}, status="finished",
              samples=[Sample(0, 1, "ab", [7, 8], ["a", "b"], [0.5, 0.25], finish_reason="length"),
                       Sample(1, 2, token_ids=[9], token_texts=[""])])
    data = json.loads(run.to_json())
    assert data["bundle_version"] == 5 and data["samples"][0]["token_ids"] == [7, 8]
    assert data["samples"][0]["token_times"] == [0.5, 0.25]
    assert_same(Run.from_json(run.to_json()), run)
    half = dataclasses.replace(run, events=[Event(0.5, False, [EventOutput(0, "a", [7])])])
    assert_same(Run.from_json(half.to_json()), half)


def test_logprobs_are_written_with_the_fewest_digits_of_their_float32_and_read_back_identical():
    run = generated_run("DELTA", n=3, tokens=8, logprobs=3, seed=2)
    data = run.to_dict()
    assert data["logprobs_float32"] is True
    value = run.samples[0].logprobs[0].top[0][1]
    assert len(repr(value)) > 12 and f"{float(np.float32(value))!r}" == repr(value)
    written = json.loads(json.dumps(data))["samples"][0]["logprobs"][0]
    assert str(np.float32(value)) in [repr(v) for v in written if isinstance(v, float)]
    assert Run.from_json(run.to_json()) == run
    exact = Run(request={"n": 1}, samples=[Sample(0, None, "x", [4], logprobs=[TokenLogprob(4, math.log(0.3))])])
    data = exact.to_dict()
    assert "logprobs_float32" not in data and data["samples"][0]["logprobs"][0]["logprob"] == math.log(0.3)
    assert Run.from_json(exact.to_json()) == exact


def test_a_logprob_that_is_not_finite_is_written_as_valid_json():
    top = [(4, -math.inf, "x"), (5, math.nan, "y")]
    run = Run(request={"n": 1}, samples=[Sample(0, None, "x", [4], ["x"], logprobs=[TokenLogprob(4, -math.inf, 1, "x",
                                                                                               top)])])
    text = run.to_json()
    assert "NaN" in text and json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    again = Run.from_json(text).samples[0].logprobs[0]
    assert again.logprob == -math.inf and again.top[0][1] == -math.inf and math.isnan(again.top[1][1])


def test_version_4_reads_into_the_layout_of_versions_1_and_2():
    for kind in KINDS:
        run = generated_run(kind, n=4, tokens=10, logprobs=2)
        assert Run._from_dict(bundle_format.decode(json.loads(run.to_json()))) == run


# ---- size --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_a_realistic_run_costs_at_most_60_bytes_per_sampled_token(kind):
    run = generated_run(kind, n=128, tokens=96)
    assert tokens(run) > 128 * 80
    per_token = bundle_bytes_per_token(run)
    plain = {**bundle_format.decode(run.to_dict()), "bundle_version": 2}
    old = len(json.dumps(plain, ensure_ascii=False)) / tokens(run)
    print(f"{kind}: {per_token:.1f} bytes per token (version 2: {old:.0f}), {len(run.events)} events")
    assert per_token <= 60
    assert Run.from_json(run.to_json()) == run


@pytest.mark.parametrize("kind", ["CUMULATIVE", "DELTA"])
def test_an_event_per_output_costs_at_most_60_bytes_per_sampled_token_too(kind):
    run = generated_run(kind, n=128, tokens=96, alone=True)
    assert len(run.events) == tokens(run), "each event has one output of one token"
    per_token = bundle_bytes_per_token(run)
    print(f"{kind}, an event per output: {per_token:.1f} bytes per token")
    assert per_token <= 60
    assert Run.from_json(run.to_json()) == run


@pytest.mark.parametrize("kind", KINDS)
def test_the_cost_with_top_5_logprobs(kind):
    run = generated_run(kind, n=64, tokens=96, logprobs=5)
    per_token = bundle_bytes_per_token(run)
    print(f"{kind} with top-5 logprobs: {per_token:.1f} bytes per token")
    assert per_token <= 150
    assert Run.from_json(run.to_json()) == run


def test_fields_at_their_default_are_left_out_and_others_kept():
    run = Run(request={"n": 1}, samples=[Sample(0, None)], usage={}, engine={"a": 1}, started_at=0)
    data = run.to_dict()
    assert set(data) == {"bundle_version", "request", "status", "usage", "engine", "started_at", "texts", "events",
                         "samples"}
    assert data["samples"] == [{"index": 0, "seed": None, "text": "", "token_ids": [], "finish_reason": None,
                                "stop_reason": None}]
    again = Run.from_json(run.to_json())
    assert again == run and again.usage == {} and type(again.started_at) is int


def test_a_run_without_tokens_has_no_cost_per_token():
    assert bundle_bytes_per_token(Run(request={}, samples=[Sample(0, None)])) == math.inf


# ---- older and damaged bundles -----------------------------------------------------------------

def test_version_1_and_2_bundles_still_load():
    run = generated_run("CUMULATIVE", n=6, tokens=20, logprobs=2, seed=5)
    plain = bundle_format.decode(run.to_dict())  # the layout versions 1 and 2 were written in
    assert Run.from_json(json.dumps({**plain, "bundle_version": 2})) == run
    assert Run.from_json(json.dumps(plain)) == run


def test_version_3_bundles_still_load():
    """Bundles version 3 wrote (every output kind, with and without logprobs, an event per output,
    a run built by hand), beside the same runs written plainly as version 2."""
    v3, v2 = read_runs(DATA / "bundles-v3.jsonl"), read_runs(DATA / "bundles-v3-as-v2.jsonl")
    lines = (DATA / "bundles-v3.jsonl").read_text(encoding="utf-8").splitlines()
    assert {json.loads(line)["bundle_version"] for line in lines} == {3} and len(v3) == len(lines) == 8
    assert v3 == v2
    assert {r.output_kind for r in v3} == set(KINDS) and any(s.logprobs for r in v3 for s in r.samples)
    for run in v3:  # and each is written as version 4 now, and reads back the same
        assert_same(Run.from_json(run.to_json()), run)


def test_version_4_bundles_still_load():
    """Bundles version 4 wrote (the version 3 runs above, and a run whose logprobs are arrays, each
    integer array in int32): they read as the runs they were written from, and write as version 5."""
    lines = (DATA / "bundles-v4.jsonl").read_text(encoding="utf-8").splitlines()
    assert {json.loads(line)["bundle_version"] for line in lines} == {4}
    v4 = read_runs(DATA / "bundles-v4.jsonl")
    arrays = synthetic_run(4, 12, seed=3, logprobs=3, events=True)
    assert v4[:-1] == read_runs(DATA / "bundles-v3.jsonl")
    assert_same(v4[-1], arrays)
    assert all(isinstance(s.logprobs, Logprobs) for s in v4[-1].samples)
    for run, line in zip(v4, lines, strict=True):
        again = run.to_json()
        assert_same(Run.from_json(again), run)
        if run is v4[-1]:  # its ids, counts and ranks in fewer bytes
            assert len(again) < len(line) * 0.9, (len(again), len(line))


@pytest.mark.parametrize(("largest_id", "dtype"), [(200, "u1"), (49_151, "u2"), (151_935, "i4")])
def test_integer_arrays_are_written_in_the_fewest_bytes_that_hold_them(largest_id, dtype):
    """A vocabulary's ids in one byte, two (most models' vocabularies) or four; read back exact."""
    rng = random.Random(largest_id)
    ids = [rng.randrange(largest_id) for _ in range(30)] + [largest_id]
    lps = Logprobs({})
    for token_id in ids:
        top = [token_id, *rng.sample(range(largest_id + 1), 2)]
        lps.add(token_id, -rng.random(), 1, top, [-rng.random() for _ in top])
    run = Run(request={"prompt": "p", "n": 1, "output_kind": "FINAL_ONLY"}, status="finished",
              samples=[Sample(0, 1, token_ids=list(ids), token_texts=[f"<{t}>" for t in ids],
                              text="".join(f"<{t}>" for t in ids), finish_reason="length", logprobs=lps)])
    written = json.loads(run.to_json())["samples"][0]["logprobs"]
    assert {name: written[name]["dtype"] for name in ("top_id", "rank", "count", "logprob")} == \
        {"top_id": dtype, "rank": "u1", "count": "u1", "logprob": "f4"}
    assert Run.from_json(run.to_json()) == run


def damaged_bundles() -> list[tuple[str, callable]]:
    def change(fn):
        def apply(data):
            fn(data)
            return data
        return apply

    return [
        ("it has a field this playground does not know", change(lambda d: d.update(extra=1))),
        ("its request is not an object", change(lambda d: d.update(request=5))),
        ("its token texts are not an object", change(lambda d: d.update(texts=[1, 2]))),
        ("its token texts have a key that is not a token id", change(lambda d: d["texts"].update(x="y"))),
        ("its events are not a list", change(lambda d: d.update(events={}))),
        ("event 1 is not \\[time, outputs\\]", change(lambda d: d["events"].__setitem__(1, [0.1]))),
        ("event 1 is not \\[time, outputs\\]", change(lambda d: d["events"][1].append({"colour": 1}))),
        ("event 0, output 0 is not \\[index, count", change(lambda d: d["events"][0][1].__setitem__(0, ["x"]))),
        ("event 0, output 0 is of sample 7, which the bundle does not have",
         change(lambda d: d["events"][0][1][0].__setitem__(0, 7))),
        ("event 0, output 0 has a count of tokens that is not a whole number",
         change(lambda d: d["events"][0][1][0].__setitem__(1, "abc"))),
        ("event 0, output 0 brings tokens its sample does not have",
         change(lambda d: d["events"][0][1][0].__setitem__(1, 99999))),
        ("event 0, output 0 has a text that is neither",
         change(lambda d: d["events"][0][1].__setitem__(0, d["events"][0][1][0][:2] + [7]))),
        ("event 0, output 0 is an object without exactly the fields",
         change(lambda d: d["events"][0][1].__setitem__(0, {"index": 0}))),
        ("sample 1 has no list of token ids", change(lambda d: d["samples"].__setitem__(1, [1]))),
        ("sample 1 has no list of token ids", change(lambda d: d["samples"][1].update(token_ids=[1, "2"]))),
        ("sample 1 has a field this playground does not know", change(lambda d: d["samples"][1].update(colour=1))),
        ("sample 1 has no seed", change(lambda d: d["samples"][1].pop("seed"))),
        ("sample 1 has no text and no token_ids", change(lambda d: [d["samples"][1].pop(k) for k in ("text",
                                                                                                    "token_ids")])),
        ("sample 1 has token texts that are neither", change(lambda d: d["samples"][1].update(token_texts=3))),
        ("sample 1 has a token text for a position it does not have",
         change(lambda d: d["samples"][1].update(token_texts={"500": "x"}))),
        ("sample 1 has logprobs that are neither a list nor typed arrays",
         change(lambda d: d["samples"][1].update(logprobs=3))),
        ("sample 1, logprob 0 is neither a list", change(lambda d: d["samples"][1]["logprobs"].__setitem__(0, 3))),
        ("sample 1, logprob 0 has an alternative", change(lambda d: d["samples"][1]["logprobs"].__setitem__(
            0, [99999, -1.0]))),
        ("sample 1, logprob 0 has alternatives that are not", change(lambda d: d["samples"][1]["logprobs"].__setitem__(
            0, {"top": [1, 2, 3]}))),
    ]


@pytest.mark.parametrize("message, damage", damaged_bundles())
def test_a_damaged_bundle_is_refused_with_a_sentence(message, damage):
    run = generated_run("DELTA", n=3, tokens=6, logprobs=2, seed=4)
    data = damage(json.loads(run.to_json()))
    with pytest.raises(InvalidBundle, match="^this run bundle is damaged: " + message):
        Run.from_json(json.dumps(data))


def test_a_damaged_bundle_in_a_file_of_bundles_is_named_by_its_line():
    runs = [generated_run(kind, n=4, tokens=10, logprobs=2, seed=k) for k, kind in enumerate(KINDS)]
    lines = [r.to_json() for r in runs]
    broken = json.loads(lines[1])
    broken["events"][0] = "nope"
    found, errors = parse_bundles("\n".join([lines[0], json.dumps(broken), lines[2], ""]))
    assert [x.line for x in found] == [1, 3] and [x.run for x in found] == [runs[0], runs[2]]
    assert [str(e) for e in errors] == [("line 2: this run bundle is damaged: event 0 is not [time, outputs] or "
                                         "[time, outputs, facts]")]
    found, errors = parse_bundles("\n".join(lines))
    assert errors == [] and [x.run for x in found] == runs


def test_a_request_whose_settings_are_not_of_their_types_is_refused_by_the_setting(tmp_path):
    """A page puts an opened run's settings in its form, and Run sends them: a bundle whose request
    says output_kind "bogus", a prompt of 12345 or a temperature "abc" is named at the reader,
    not opened to fail every Run after it. So are a version that is no number and JSON nested
    past the interpreter's depth, and a file that is not text is named by its name."""
    run = generated_run("DELTA", n=2, tokens=4, seed=1)
    for field, value, said in (("output_kind", "bogus", "output_kind must be one of CUMULATIVE, DELTA, FINAL_ONLY, "
                                "got 'bogus'"), ("prompt", 12345, "prompt must be text, got 12345"),
                               ("temperature", "abc", "temperature must be a number, got 'abc'"),
                               ("stop", 5, "stop must be a string or a list of strings, got 5")):
        data = json.loads(run.to_json())
        data["request"][field] = value
        found, errors = parse_bundles(json.dumps(data))
        assert found == [] and [e.message for e in errors] == [f"this run bundle is damaged: its request's {said}"]
    data = json.loads(run.to_json())
    data["request"]["temperature"] = 9.5  # past today's bounds, of its type: a record opens as it was made
    assert [x.run.request["temperature"] for x in parse_bundles(json.dumps(data))[0]] == [9.5]
    data["bundle_version"] = "5"
    assert parse_bundles(json.dumps(data))[1][0].message == "this bundle's bundle_version must be a whole number, " \
                                                            "got '5'"
    assert parse_bundles("[" * 100_000)[1][0].message.startswith("its JSON nests deeper than any run bundle")
    # What a page shows of a run is its ids, seeds and texts: each of its kind, or the file is named.
    for change, said in (
            (lambda d: d["request"].update(request_id="x` <svg>"), "request_id must be a run's id"),
            (lambda d: d["request"].update(replay={"of": "<img src=x>"}), "replay.of must be a run's id"),
            (lambda d: d["request"].update(stop=["\x00"]), "stop string #1 contains a NUL character"),
            (lambda d: d["samples"][0].update(seed="x"), "sample 0's seed must be a whole number"),
            (lambda d: d["samples"][0].update(text="\ud800"), "sample 0's text is not valid UTF-8")):
        data = json.loads(run.to_json())
        change(data)
        errors = parse_bundles(json.dumps(data))[1]
        assert errors and said in errors[0].message, (said, errors)
    hand = {"samples": [{"text": "a", "token_ids": [-5], "token_texts": ["a"]}]}  # written by a script
    assert "sample 0's token ids must be whole numbers from 0, got -5" in parse_bundles(json.dumps(hand))[1][0].message
    assert parse_bundles('{"request": {"seed": ' + "9" * 5000 + '}, "samples": []}')[1][0].message.startswith(
        "its JSON holds a number of more than 4,300 digits")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x00\x01\xff\xfe")
    with pytest.raises(InvalidBundle, match="^binary.json is not text"):
        read_runs(binary)


def test_a_file_read_all_or_nothing_names_its_first_bad_line_and_counts_the_rest(tmp_path):
    from playground.errors import InvalidBundle

    path = tmp_path / "mixed.jsonl"
    path.write_text('{"prompt": "a line of batch input"}\nnot json\n["a b", "a c"]\n', encoding="utf-8")
    with pytest.raises(InvalidBundle) as refused:
        read_runs(path)
    said = str(refused.value)
    assert said.startswith("mixed.jsonl, line 1: this is not a run bundle") and "a line of batch's input" in said
    assert said.endswith("(and 1 more line(s) that are not bundles either)"), said
