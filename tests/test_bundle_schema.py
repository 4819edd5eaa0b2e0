"""Real bundles against the published JSON Schema: the real engine's runs, every output_kind on the
wrapper's and vLLM's own fan-out, with and without logprobs, are valid under
playground/bundle.schema.json, and what ``json`` alone reads of each sample is what the project's
reader gives. Without an engine: the bundles the playground writes (a run recorded through the
Backend seam, a failed one, runs written by hand, older versions written anew) are valid, and the
schema is as strict as they are: a seed outside vLLM's range, a finish reason vLLM does not give, a
failed run that does not say why, a request without its id are refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from playground.bundle_format import SCHEMA_PATH
from playground.request import OUTPUT_KINDS, SampleRequest
from playground.run import Run
from tests.helpers import record_to_end

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
PROMPT = "A list of three colours:"


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["bundle_version"] == {"const": 5, "description": SCHEMA["properties"][
        "bundle_version"]["description"]}


@pytest.mark.parametrize("logprobs", [None, 3])
@pytest.mark.parametrize("mode", ["wrapper", "native"])
@pytest.mark.parametrize("output_kind", OUTPUT_KINDS)
def test_a_real_bundle_is_valid_and_json_alone_reads_its_samples(backend, output_kind, mode, logprobs):
    run = record_to_end(backend, SampleRequest(prompt=PROMPT, n=2, seed=8, max_tokens=6, output_kind=output_kind,
                                               mode=mode, logprobs=logprobs, use_chat_template=False,
                                               stop=["\n\n"]))
    text = run.to_json()
    data = json.loads(text)
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert data["bundle_version"] == 5 and run.status == "finished" and run.events
    read = Run.from_json(text)
    assert read == run
    assert [(s["index"], s["seed"], s["text"], s["token_ids"], s["finish_reason"], s["stop_reason"])
            for s in data["samples"]] == [(s.index, s.seed, s.text, s.token_ids, s.finish_reason, s.stop_reason)
                                          for s in read.samples]
    assert all(s["token_ids"] for s in data["samples"]) and [s["seed"] for s in data["samples"]] == [8, 9]
    assert (logprobs is None) == all(s.logprobs is None for s in run.samples)


def test_a_bundle_that_breaks_the_layout_is_told_by_the_schema(backend):
    run = record_to_end(backend, SampleRequest(prompt=PROMPT, n=1, seed=1, max_tokens=2, use_chat_template=False))
    data = json.loads(run.to_json())
    del data["samples"][0]["text"]
    with pytest.raises(jsonschema.ValidationError, match="'text' is a required property"):
        jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_what_a_run_records_of_where_it_came_from_is_in_the_schema(backend):
    """A sweep's value, a branch's point, a replay's source, a batch line and a right answer, each
    as the code that writes it writes it: valid, and each described by the schema (not merely let
    through as an unknown property)."""
    from playground.analysis.branching import BranchPoint
    from playground.sampling.sweep_request import SweepRequest

    run = record_to_end(backend, SampleRequest(prompt=PROMPT, n=1, seed=1, max_tokens=2, use_chat_template=False))
    sweep = SweepRequest.from_user("temperature", "0.5 1.0", prompt=PROMPT, n=1, seed=1)
    labels = {**sweep.labels(1), "branch": BranchPoint("run-1", 0, 3, 42, " sea").to_dict(),
              "replay": {"of": "run-1", "pace": "x4", "note": "the file's next run plays"}, "batch_line": 3,
              "reference": "391"}
    data = json.loads(run.to_json())
    data["request"].update(labels)
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    described = SCHEMA["properties"]["request"]["properties"]
    assert all(described[name].get("description") for name in labels), set(labels) - set(described)
    data["request"]["batch_line"] = 0
    with pytest.raises(jsonschema.ValidationError, match="0 is less than the minimum of 1"):
        jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_a_bundle_another_client_wrote_to_the_schema_opens_without_the_text_of_each_token(tmp_path):
    """The schema asks each sample's text and ids, not each token's text: such a bundle opens,
    its samples as written, the tokens' texts filled where the views need them, and
    ``analyze --graph`` draws it."""
    from playground import analysis
    from playground.bundles import read_runs

    data = {"bundle_version": 5, "status": "finished", "texts": {"2": " cat"}, "events": [],
            "request": {"prompt": "Where is the cat?", "n": 2, "seed": 1, "request_id": "theirs-1"},
            "samples": [{"index": 0, "seed": 1, "text": "The cat sat.", "token_ids": [1, 2, 3],
                         "finish_reason": "stop", "stop_reason": None},
                        {"index": 1, "seed": 2, "text": "A cat sat.", "token_ids": [4, 2, 3],
                         "finish_reason": "stop", "stop_reason": None}]}
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    path = tmp_path / "theirs.jsonl"
    path.write_text(json.dumps(data) + "\n", encoding="utf-8")
    (run,) = read_runs(path)
    assert [(s.text, s.token_ids, s.token_texts) for s in run.samples] == [("The cat sat.", [1, 2, 3], []),
                                                                          ("A cat sat.", [4, 2, 3], [])]
    assert analysis.pieces(run.samples[0]) == ["⟨id:1⟩", "⟨id:2⟩", "⟨id:3⟩"]
    graph = analysis.sample_graph(run)
    shared = [node for node in graph.nodes if node.samples == [0, 1]]
    assert [node.text for node in shared] == ["cat sat."] and graph.text_of(1) == "A cat sat."


# ---- as strict as what the playground writes, without an engine ---------------------------------
# Runs made by the code that makes them (the recorder through the real Backend seam, a failed run's
# Recording, the reader of runs written by hand and of older versions), and each bundle one
# field away from them that no code writes: refused, each where it goes wrong.

VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
MAX_SEED = 2**63 - 1
DATA = Path(__file__).resolve().parent / "data"


def refusals(data: dict) -> set[tuple[str, str]]:
    """Every reason the schema refuses ``data`` for: (where, keyword), those of oneOf's and
    anyOf's alternatives too."""
    found = set()

    def walk(errors) -> None:
        for error in errors:
            found.add((error.json_path, error.validator))
            walk(error.context or [])

    walk(VALIDATOR.iter_errors(data))
    return found


def changed(data: dict, change) -> dict:
    data = copy.deepcopy(data)
    change(data)
    return data


@pytest.fixture(scope="module")
def sampled() -> dict:
    """The bundle of a run the playground sampled: a synthetic run replayed through ``record()``
    (its request checked and planned, its seeds the plan's, its events the recorder's), no engine."""
    from playground.backends.pace import Pace
    from playground.backends.replay import ReplayBackend
    from playground.backends.synthetic import synthetic_run

    source = synthetic_run(3, 6, seed=2, logprobs=2, events=True)
    run = record_to_end(ReplayBackend.of([source], Pace.parse("x1000")), SampleRequest("any prompt"))
    assert run.status == "finished" and all(s.finish_reason for s in run.samples)
    return json.loads(run.to_json())


def test_runs_the_playground_makes_without_an_engine_are_valid(sampled):
    from playground.backends.synthetic import synthetic_run

    VALIDATOR.validate(sampled)
    assert [s["seed"] for s in sampled["samples"]] == [1000, 1001, 1002] and sampled["request"]["rendered_prompt"]
    for made in (synthetic_run(2, 5), synthetic_run(2, 5, logprobs=None, events=True)):
        VALIDATOR.validate(json.loads(made.to_json()))


def test_a_failed_run_says_why_and_is_valid():
    """Status error as ``Recording.fail`` writes it: with the error's message, or its type's name
    when it has none; a run stopped is aborted, with a sentence too."""
    from types import SimpleNamespace

    from playground.backends.base import STOPPED_REASON, Recording, prepare
    from playground.request import Limits

    backend = SimpleNamespace(info=lambda: {"model": "none"}, decode=lambda ids: "")
    for error, status, says in ((RuntimeError("the server went away"), "error", "the server went away"),
                                (ValueError(), "error", "ValueError"),
                                (KeyboardInterrupt(), "aborted", STOPPED_REASON)):
        prepared = prepare(Limits(), SampleRequest("A prompt", n=2, seed=None), ("A prompt", [5, 6]))
        data = json.loads(Recording(backend, prepared).fail(error).to_json())
        VALIDATOR.validate(data)
        assert (data["status"], data["error"]) == (status, says)
        assert [s["seed"] for s in data["samples"]] == [data["request"]["seed"], data["request"]["seed"] + 1]


def test_bundles_of_older_versions_written_as_version_5_are_valid():
    """What the reader opens of versions 3 and 4 (runs of every output kind, a run built by hand
    with no prompt and no seed, one with logprobs as arrays) writes as version 5, valid."""
    from playground.bundles import read_runs

    runs = read_runs(DATA / "bundles-v3.jsonl") + read_runs(DATA / "bundles-v4.jsonl")
    assert any("prompt" not in r.request for r in runs) and len(runs) == 17
    for run in runs:
        VALIDATOR.validate(json.loads(run.to_json()))


@pytest.mark.parametrize("written, seeds", [('["The cat sat.", "A cat sat."]', [None, None]),
                                            ('{"prompt": "Where?", "seed": 7, "samples": ["Here.", "There."]}',
                                             [7, 8])])
def test_a_run_written_by_hand_is_valid_once_the_playground_writes_it(written, seeds):
    """A run of texts alone (opened on the page, then saved to History or exported) is written as
    version 5: its samples' seeds the request's seed plus their place, or null without one, its
    request what its writer gave, and its id."""
    from playground.bundles import parse_bundles

    (located,), errors = parse_bundles(written)
    data = json.loads(located.run.to_json())
    VALIDATOR.validate(data)
    assert not errors and [s["seed"] for s in data["samples"]] == seeds
    assert data["request"]["request_id"].startswith("hand-")


@pytest.mark.parametrize("seed, valid", [(-1, False), (2**63, False), (2**64, False), (1.5, False), ("7", False),
                                         (0, True), (MAX_SEED, True)])
def test_a_seed_outside_vllms_range_is_refused(sampled, seed, valid):
    for where, change in (("$.samples[1].seed", lambda d: d["samples"][1].update(seed=seed)),
                          ("$.request.seed", lambda d: d["request"].update(seed=seed))):
        reasons = refusals(changed(sampled, change))
        assert not reasons if valid else where in {path for path, _ in reasons}, (where, reasons)


def test_a_null_seed_is_a_run_written_by_hand_not_one_the_playground_sampled(sampled):
    """A blank seed is drawn before a run is sampled (backends.base.prepare): null only where a run
    was written by hand without one (no rendered prompt)."""
    assert ("$.samples[0].seed", "type") in refusals(changed(sampled, lambda d: d["samples"][0].update(seed=None)))
    assert ("$.request.seed", "type") in refusals(changed(sampled, lambda d: d["request"].update(seed=None)))
    unsampled = changed(sampled, lambda d: d["request"].pop("rendered_prompt"))
    unsampled["request"]["seed"] = unsampled["samples"][0]["seed"] = None
    assert not refusals(unsampled)


def test_a_finish_reason_vllm_does_not_give_is_refused(sampled):
    """A sample's and an output's (compact or written whole): stop, length, abort, error or null."""
    number, k = next((number, k) for number, event in enumerate(sampled["events"])
                     for k, out in enumerate(event[1]) if len(out) >= 4)
    index = sampled["events"][number][1][k][0]

    def whole(reason):
        return lambda d: d["events"][number][1].__setitem__(k, {
            "index": index, "text": "x", "token_ids": [1], "finish_reason": reason, "stop_reason": None})

    for reason in ("stop", "length", "abort", "error", None):
        assert not refusals(changed(sampled, lambda d, reason=reason: d["samples"][0].update(finish_reason=reason)))
        assert not refusals(changed(sampled, whole(reason)))
    for reason in ("foo", "STOP", "", 1):
        assert ("$.samples[0].finish_reason", "enum") in refusals(
            changed(sampled, lambda d, reason=reason: d["samples"][0].update(finish_reason=reason)))
        assert (f"$.events[{number}][1][{k}][3]", "enum") in refusals(
            changed(sampled, lambda d, reason=reason: d["events"][number][1][k].__setitem__(3, reason)))
        assert (f"$.events[{number}][1][{k}].finish_reason", "enum") in refusals(changed(sampled, whole(reason)))


def test_a_failed_run_without_its_error_is_refused(sampled):
    failed = changed(sampled, lambda d: d.update(status="error", error="the engine core died"))
    assert not refusals(failed)
    assert ("$", "required") in refusals(changed(failed, lambda d: d.pop("error")))
    assert ("$.error", "type") in refusals(changed(failed, lambda d: d.update(error=None)))
    assert ("$.error", "minLength") in refusals(changed(failed, lambda d: d.update(error="")))
    with pytest.raises(jsonschema.ValidationError, match="'error' is a required property"):
        VALIDATOR.validate(changed(failed, lambda d: d.pop("error")))
    for status in ("finished", "aborted", "running"):  # an error is said only of a failed run
        assert not refusals(changed(sampled, lambda d, status=status: d.update(status=status)))


def test_a_request_without_its_id_or_a_sampled_one_without_what_was_asked_is_refused(sampled):
    with pytest.raises(jsonschema.ValidationError, match="'request_id' is a required property"):
        VALIDATOR.validate(changed(sampled, lambda d: d.update(request={})))
    for name in ("prompt", "n", "seed", "output_kind", "mode", "prompt_token_ids", "request_id"):
        assert ("$.request", "required") in refusals(changed(sampled, lambda d, name=name: d["request"].pop(name)))
    assert ("$.request.request_id", "type") in refusals(changed(sampled, lambda d: d["request"].update(
        request_id=None)))
    # Without a rendered prompt it was not sampled here (a run written by hand): its id is enough.
    assert not refusals(changed(sampled, lambda d: d.update(request={"request_id": "hand-1"})))


def test_every_setting_of_the_request_schema_is_typed_in_the_bundle_schema(sampled):
    """A new field of SampleRequest is a new property of the bundle's request: its default valid,
    a value of no setting's type refused there."""
    from playground.request import SETTINGS

    request = {**sampled["request"], **SampleRequest("p").to_dict(), "seed": 1}
    assert not refusals(changed(sampled, lambda d: d.update(request=request)))
    for name in SETTINGS:
        reasons = refusals(changed(sampled, lambda d, name=name: d["request"].update({name: {"no": "setting"}})))
        assert f"$.request.{name}" in {path for path, _ in reasons}, name
