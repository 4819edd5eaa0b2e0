"""The record's fast forms read exactly as the slow ones: token texts from the tokenizer's bytes
table, logprobs kept as vLLM's flat arrays, and the samples feed reading those arrays.

vLLM's ``FlatLogprobs`` here are built by vLLM's own code (``append_logprobs_for_next_position``,
as its output processor does), and the tokenizer is the default model's.
"""

from __future__ import annotations

import json
import random
import threading
from array import array

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vllm.logprobs import append_logprobs_for_next_position, create_sample_logprobs

from playground.backends.outputs import logprobs_from_vllm
from playground.backends.pieces import DecodedPieces, TokenTable
from playground.backends.synthetic import synthetic_run
from playground.logprobs import Logprobs, TokenLogprob
from playground.run import Sample
from playground.ui.samples_area import SamplesSession
from tests.session_start import STARTING


@pytest.fixture(scope="module")
def tokenizer(model_path):
    STARTING.imports()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path)


def test_the_token_table_spells_what_the_tokenizer_decodes(tokenizer):
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    table = TokenTable(tokenizer, decode)
    assert table.kind == "byte-level"
    rng = random.Random(3)
    texts = ["Héllo wörld — 東京 😀 naïve café", "def f(x):\n    return x ** 2  # ok", "<|im_start|>user\nHi"]
    sequences = [tokenizer.encode(t) for t in texts] + [[rng.randrange(len(tokenizer)) for _ in range(30)]
                                                         for _ in range(200)]
    for ids in sequences:
        fast, slow = table.stream(), DecodedPieces(decode)
        pieces = fast.add(ids[:5]) + fast.add(ids[5:])  # as tokens arrive
        assert len(pieces) == len(ids)
        whole = decode(ids)
        if not whole.endswith("\ufffd"):  # a sequence cut inside a character ends differently, by design
            assert "".join(pieces) == whole
            assert "".join(slow.add(ids)) == whole
    emoji = tokenizer.encode("😀")
    assert len(emoji) > 1 and table.stream().add(emoji)[:-1] == [""] * (len(emoji) - 1)  # completed by the last
    assert table.alone(tokenizer.encode(" Paris")[0]) == " Paris"


def flat_and_dicts(positions: list[tuple[int, list[int], list[float], int]]):
    """The same positions as vLLM keeps them both ways: flat arrays, and a dict per position."""
    flat, dicts = create_sample_logprobs(True), create_sample_logprobs(False)
    for _, ids, values, rank in positions:
        for container in (flat, dicts):
            append_logprobs_for_next_position(container, ids, values, [f"t{t}" for t in ids], rank, len(ids) - 1)
    return flat, dicts


def float32(x: float) -> float:
    return array("f", [x])[0]


positions = st.lists(st.tuples(st.integers(0, 50), st.integers(1, 4), st.integers(0, 5), st.integers(1, 60)),
                     min_size=1, max_size=12)


@given(positions)
def test_flat_logprobs_read_as_vllms_dicts_do(drawn):
    """Whether the sampled token is in the top-k or below it, the arrays give the TokenLogprobs
    that the dict layout gives, position by position, and in CUMULATIVE's slices."""
    rng = random.Random(len(drawn))
    layout, sampled_ids = [], []
    for sampled, k, place, rank in drawn:
        top = rng.sample([t for t in range(100, 200) if t != sampled], k)
        inside = place < k
        if inside:
            top[place] = sampled
        values = sorted((float32(-rng.random() * 5) for _ in range(k)), reverse=True)
        sampled_value = values[place] if inside else float32(values[-1] - rng.random())
        layout.append((sampled, [sampled, *top], [sampled_value, *values], place + 1 if inside else k + rank))
        sampled_ids.append(sampled)
    flat, dicts = flat_and_dicts(layout)
    texts: dict[int, str] = {}
    arrays = Logprobs(texts)
    arrays.add_flat(flat, 0, 2 if len(layout) > 2 else len(layout))
    arrays.add_flat(flat, len(arrays), len(layout) - len(arrays))  # the rest, as a later output
    for token_id in arrays.ids_from(0):
        texts.setdefault(token_id, f"t{token_id}")
    expected = logprobs_from_vllm(sampled_ids, dicts)
    assert list(arrays) == expected and arrays == expected
    assert Logprobs.of(expected, {}) == arrays
    # Outputs that queued up, merged as vLLM's output collector merges them (FlatLogprobs.extend,
    # a dict per position: a sampled token in the top-k loses its second entry), read the same.
    merged = flat[:1]
    merged.extend(flat[1:])
    again = Logprobs(texts)
    again.add_flat(merged, 0, len(layout))
    assert list(again) == expected and again == arrays


def test_irregular_logprobs_stay_a_list_and_compare_equal():
    odd = [TokenLogprob(1, None, None, "a", [(1, -0.5, "a")]), TokenLogprob(2, -0.1, 3, "b", [(9, -2.0, "z")])]
    assert Logprobs.of(odd, {}) is None
    regular = [TokenLogprob(1, -0.5, 1, "a", [(1, -0.5, "a"), (2, -1.5, "b")])]
    made = Logprobs.of(regular, {})
    assert made is not None and made == regular and regular == made and made[0] == regular[0]
    assert made[0:1] == regular and len(made) == 1 and [lp.token_id for lp in made] == [1]


def test_the_feed_reads_the_arrays_as_it_reads_the_lists():
    """One run, its logprobs as arrays and as lists: the samples area gets the same message,
    entropies included (the one computation, analysis/entropy.py)."""
    run = synthetic_run(12, 20, seed=5)
    assert all(isinstance(s.logprobs, Logprobs) for s in run.samples)
    as_lists = synthetic_run(12, 20, seed=5)
    for s in as_lists.samples:
        s.logprobs = list(s.logprobs)
    a, b = json.loads(SamplesSession().show(run)), json.loads(SamplesSession().show(as_lists))
    assert a["u"] == b["u"] and any(u[6] for u in a["u"])


@given(st.lists(st.one_of(st.text(max_size=4), st.just(None), st.integers(0, 3)), max_size=40))
def test_a_text_grown_by_parts_reads_as_one_grown_by_concatenation(steps):
    """``Sample.add_text`` keeps parts until the text is read (``GrowingText``): every read, and
    every set in between, sees what ``text += part`` would have made. A step is a part added, a
    read (None), or a set to a prefix of the text so far (an int)."""
    sample, plain = Sample(index=0, seed=None), ""
    for step in steps:
        if isinstance(step, str):
            sample.add_text(step)
            plain += step
        elif step is None:
            assert sample.text == plain
        else:
            sample.text = plain = plain[:step]
    assert sample.text == plain
    assert sample == Sample(index=0, seed=None, text=plain)


def test_a_text_read_from_another_thread_while_it_grows_loses_no_part():
    """The live panels read samples from a worker thread while the recorder adds to them."""
    sample, parts = Sample(index=0, seed=None), [str(k % 10) for k in range(100_000)]
    adding = threading.Thread(target=lambda: [sample.add_text(part) for part in parts])
    adding.start()
    seen = []
    while adding.is_alive():
        seen.append(sample.text)
    adding.join()
    whole = "".join(parts)
    assert sample.text == whole
    assert all(whole.startswith(text) for text in seen)
