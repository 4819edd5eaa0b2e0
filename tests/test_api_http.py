"""/sample without this project's client: Gradio's HTTP API called as the README's curl and jq do,
with a plain HTTP client (httpx) and ``json`` alone, on the real app and engine."""

from __future__ import annotations

import json

import httpx

from playground.run import Run
from playground.ui.api import SIGNATURE

PROMPT = "The lighthouse keeper wrote in his log"


def call(app_url: str, path: str, body: dict) -> list[tuple[str, object]]:
    """POST the call, then read its event stream to the end: [(event name, data)] in order."""
    base = app_url.rstrip("/") + "/gradio_api/call/"
    with httpx.Client(timeout=300) as http:
        posted = http.post(base + path, json=body)
        assert posted.status_code == 200, posted.text
        event_id = posted.json()["event_id"]
        events, name = [], None
        with http.stream("GET", f"{base}sample/{event_id}") as stream:
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    events.append((name, json.loads(line.removeprefix("data: "))))
    return events


def samples_of(final: str) -> list[dict]:
    """What a client in any language does: parse JSON, read each sample's plain fields."""
    return [{name: s[name] for name in ("index", "seed", "text", "token_ids", "finish_reason")}
            for s in json.loads(final)["samples"]]


def test_sample_called_over_http_streams_progress_then_a_bundle_json_alone_reads(app_url):
    """The positional form: ``{"data": [...]}``, every parameter of /sample in its order."""
    values = {"prompt": PROMPT, "n": 3, "seed": 21, "output_kind": "CUMULATIVE", "max_tokens": 16,
              "use_chat_template": False}
    data = [values[name] if name in values else p.default for name, p in SIGNATURE.parameters.items()]
    events = call(app_url, "sample", {"data": data})
    names = [name for name, _ in events if name != "heartbeat"]
    assert names[-1] == "complete" and names.count("complete") == 1, names
    assert "generating" in names[:-1], "progress arrives before the final value"
    final = events[-1][1][0]
    plain = samples_of(final)
    run = Run.from_json(final)  # the project's reader agrees with json alone
    assert plain == [{"index": s.index, "seed": s.seed, "text": s.text, "token_ids": s.token_ids,
                      "finish_reason": s.finish_reason} for s in run.samples]
    assert [s["seed"] for s in plain] == [21, 22, 23] and all(s["token_ids"] and s["text"] for s in plain)
    progress = [json.loads(data[0]) for name, data in events if name == "generating"]
    ids: dict[int, list[int]] = {}
    for snapshot in progress:  # the progress snapshots add up to the same tokens
        if "samples" in snapshot and "bundle_version" not in snapshot:
            for s in snapshot["samples"]:
                ids[s["index"]] = ids.get(s["index"], []) + s["new_token_ids"]
    assert [ids[i] for i in range(3)] == [s["token_ids"] for s in plain]


def test_sample_takes_named_parameters_and_refuses_a_bad_one_with_a_sentence(app_url, capfd):
    """The named form (Gradio's ``/call/v2``): only what differs from the defaults. A refusal is a
    sentence for the caller, not a traceback on the app's terminal."""
    events = call(app_url, "v2/sample", {"prompt": PROMPT, "n": 2, "seed": 5, "max_tokens": 8,
                                        "output_kind": "FINAL_ONLY"})
    assert events[-1][0] == "complete"
    plain = samples_of(events[-1][1][0])
    assert [s["seed"] for s in plain] == [5, 6] and all(s["finish_reason"] for s in plain)
    refused = call(app_url, "v2/sample", {"prompt": PROMPT, "n": 0})
    assert refused[-1][0] == "error"
    assert "n must be between 1 and" in json.dumps(refused[-1][1]), refused[-1]
    assert "Traceback" not in capfd.readouterr().err
    with httpx.Client(timeout=60) as http:  # names that do not fit: the caller's mistake (Gradio alone: a 500)
        for body, said in (({"prompt": PROMPT, "bogus": 1}, "bogus is not a parameter of this endpoint"),
                           ({"prompt": PROMPT, "temprature": 1}, "temprature is not a parameter of this endpoint "
                                                                 "(did you mean temperature?)"),
                           ({"n": 2}, "prompt is required"),
                           ({"data": [PROMPT]}, "a list of values in order goes to /gradio_api/call/sample")):
            answer = http.post(app_url.rstrip("/") + "/gradio_api/call/v2/sample", json=body)
            assert answer.status_code == 400 and said in answer.json()["error"], answer.text
        # By position, a list that ends early: the rest take their defaults (Gradio alone: {"error": null}).
        answer = http.post(app_url.rstrip("/") + "/gradio_api/call/sample", json={"data": []})
        assert answer.status_code == 400 and "the prompt is required" in answer.json()["error"], answer.text
        too_many = [PROMPT, *[p.default for p in list(SIGNATURE.parameters.values())[1:]], "one too many"]
        answer = http.post(app_url.rstrip("/") + "/gradio_api/call/sample", json={"data": too_many})
        assert answer.status_code == 400 and f"data has {len(too_many)} values, and /sample takes at most " \
            f"{len(too_many) - 1}" in answer.json()["error"], answer.text
    assert "Traceback" not in capfd.readouterr().err
    short = call(app_url, "sample", {"data": [PROMPT, 2, 3]})  # prompt, n, seed
    assert short[-1][0] == "complete", short[-3:]
    run = json.loads(short[-1][1][0])
    assert [s["seed"] for s in run["samples"]] == [3, 4] and run["request"]["max_tokens"] == SIGNATURE.parameters[
        "max_tokens"].default
    assert call(app_url, "v2/sample", {"prompt": PROMPT, "max_tokens": 2})[-1][0] == "complete"  # and the next works
