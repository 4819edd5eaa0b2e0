"""Seeds are exact integers everywhere: parsed as whole numbers (never through a float), every seed
of the accepted range reaches the engine, the record and a replay unchanged, and one outside the
range is refused with the range in the message."""

from __future__ import annotations

import pytest

from playground.commands.batch import build_parser
from playground.errors import InvalidRequest
from playground.request import MAX_SEED, Limits, SampleRequest
from playground.run import Run
from tests.helpers import assert_refused_clearly, record_to_end

PROMPT = "The lighthouse keeper opened his logbook and wrote"
SEVENTEEN_DIGITS = 9007199254740993  # 2**53 + 1: a float would make it ...992


@pytest.mark.parametrize("typed, expected", [
    ("9007199254740993", SEVENTEEN_DIGITS), (" 9223372036854775807 ", MAX_SEED), ("0", 0), ("42.0", 42),
    (SEVENTEEN_DIGITS, SEVENTEEN_DIGITS), (7.0, 7),
])
def test_a_seed_is_parsed_exactly(typed, expected):
    assert SampleRequest.from_user(prompt="p", seed=typed).seed == expected


@pytest.mark.parametrize("typed, message", [
    ("9223372036854775808",
     "seed must be a whole number from 0 to 2**63-1 (9223372036854775807), got 9223372036854775808"),
    ("-1", "from 0 to 2**63-1 (9223372036854775807), got -1"),
    ("1.5", "seed must be a whole number, got '1.5'"),
    ("1e400", "at most 40 digits"),
    ("seven", "seed must be a whole number, got 'seven'"),
    (True, "seed must be a whole number, not a yes/no value (true)"),  # JSON's word, not Python's True
])
def test_a_seed_outside_the_range_is_refused_with_the_range(typed, message):
    with pytest.raises(InvalidRequest) as refused:
        SampleRequest.from_user(prompt="p", n=1, seed=typed).check(Limits())
    assert message in str(refused.value)


def test_the_command_lines_seed_is_exact():
    parser = build_parser()
    args, _ = parser.parse(["in.jsonl", "--seed", "9223372036854775804", "--n", "4"])
    settings = parser.sampling_settings(args)
    assert settings["seed"] == MAX_SEED - 3
    SampleRequest.from_user(prompt="p", **settings).check(Limits())  # the largest base seed for n=4 fits
    with pytest.raises(InvalidRequest, match="largest base seed for n=4 is 9223372036854775804"):
        SampleRequest.from_user(prompt="p", **{**settings, "seed": MAX_SEED - 2}).check(Limits())


def test_a_17_digit_seed_and_the_largest_seed_round_trip_through_sample(client, backend):
    run = Run.from_json(client.predict(prompt=PROMPT, n=2, seed=SEVENTEEN_DIGITS, max_tokens=4,
                                       output_kind="FINAL_ONLY", api_name="/sample"))
    assert run.request["seed"] == SEVENTEEN_DIGITS
    assert [s.seed for s in run.samples] == [SEVENTEEN_DIGITS, SEVENTEEN_DIGITS + 1]
    assert Run.from_json(run.to_json()).samples[1].seed == SEVENTEEN_DIGITS + 1

    top = Run.from_json(client.predict(prompt=PROMPT, n=1, seed=str(MAX_SEED), max_tokens=6,
                                       output_kind="FINAL_ONLY", api_name="/sample"))
    assert top.status == "finished" and top.samples[0].seed == MAX_SEED and top.samples[0].token_ids
    replay = record_to_end(backend, SampleRequest(prompt=PROMPT, n=1, seed=MAX_SEED, max_tokens=6,
                                                  output_kind="FINAL_ONLY"))
    assert replay.samples[0].seed == MAX_SEED
    assert replay.samples[0].token_ids == top.samples[0].token_ids, "alone both times: the same tokens"

    with pytest.raises(Exception) as refused:
        client.predict(prompt=PROMPT, n=2, seed=MAX_SEED, max_tokens=4, api_name="/sample")
    assert_refused_clearly(refused.value, "largest base seed for n=2 is 9223372036854775806")
