"""Texts made from the token table read exactly as vLLM's detokenizer writes them.

The embedded backend asks the engine not to detokenize when the table can spell a run
(``backends.pieces.Spelling``). Held against vLLM's own incremental detokenizer (the class its
output processor uses, with the default model's tokenizer as vLLM loads it) over generated token
sequences cut into outputs of any size, and through the real engine against a run that vLLM
detokenized itself.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from playground.backends.pieces import TokenTable
from playground.request import SampleRequest
from tests.helpers import record_to_end, taken_alike
from tests.session_start import STARTING


@pytest.fixture(scope="module")
def vllm_tokenizer(model_path):
    STARTING.imports()
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(model_path)


@pytest.fixture(scope="module")
def table(vllm_tokenizer):
    return TokenTable(vllm_tokenizer, lambda ids: vllm_tokenizer.decode(ids, skip_special_tokens=False))


@pytest.fixture(scope="module")
def partial(vllm_tokenizer, table) -> list[int]:
    """Tokens whose bytes are not whole characters (a lead byte, a continuation, a character cut
    after a space, ...): where decoding token by token and decoding the whole part ways."""
    found = []
    for i in range(len(vllm_tokenizer)):
        try:
            table.bytes_of(i).decode("utf-8")
        except UnicodeDecodeError:
            found.append(i)
    return found


def vllm_texts(tokenizer, prompt_ids: list[int], chunks: list[list[int]], stop: bool, delta: bool) -> list[str]:
    """What vLLM's detokenizer gives for each output of a request whose tokens came in ``chunks``."""
    from vllm import SamplingParams
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.engine.detokenizer import IncrementalDetokenizer

    request = EngineCoreRequest(request_id="r", prompt_token_ids=prompt_ids, mm_features=None,
                                sampling_params=SamplingParams(max_tokens=1000), pooling_params=None, arrival_time=0.0,
                                lora_request=None, cache_salt=None, data_parallel_rank=None)
    detokenizer = IncrementalDetokenizer.from_new_request(tokenizer, request)
    texts = []
    for k, chunk in enumerate(chunks):
        last = k == len(chunks) - 1
        detokenizer.update(chunk, stop_terminated=stop and last)
        texts.append(detokenizer.get_next_output_text(finished=last, delta=delta))
    return texts


@st.composite
def runs(draw, vocab: int, partial: list[int], special: list[int]):
    pick = st.one_of(st.integers(0, vocab - 1), st.sampled_from(partial), st.sampled_from(special))
    ids = draw(st.lists(pick, min_size=1, max_size=40))
    cuts = sorted(draw(st.sets(st.integers(1, len(ids) - 1), max_size=6))) if len(ids) > 1 else []
    bounds = [0, *cuts, len(ids)]
    return [ids[a:b] for a, b in zip(bounds, bounds[1:])], draw(st.booleans())


def test_the_table_spells_what_vllms_detokenizer_writes(vllm_tokenizer, table, partial):
    prompt = vllm_tokenizer.encode("Write something, in any language:")
    special = sorted(table.special)
    assert partial and special

    def compare(chunks: list[list[int]], stop: bool) -> None:
        for kind, delta in (("DELTA", True), ("CUMULATIVE", False), ("FINAL_ONLY", False)):
            given_chunks = [sum(chunks, [])] if kind == "FINAL_ONLY" else chunks
            expected = vllm_texts(vllm_tokenizer, prompt, given_chunks, stop, delta)
            spelling = table.spelling(prompt, kind, [])
            seen, got = [], []
            for k, chunk in enumerate(given_chunks):
                seen += chunk
                text, pieces = spelling.read(0, chunk if delta else list(seen),
                                             "stop" if stop and k == len(given_chunks) - 1 else None)
                assert len(pieces) == len(chunk)
                got.append(text)
            assert got == expected, (kind, given_chunks, stop)

    @settings(max_examples=400, deadline=None)
    @given(runs(len(vllm_tokenizer), partial, special))
    @example(([[141, 0, 17]], False))  # a special token inside a character: the text reads it whole
    @example(([[9943]], False))  # a space and a cut character: nothing shows until it is whole
    @example(([[9943], [30]], True))
    def check(drawn):
        compare(*drawn)

    check()
    # Text as models write it, characters cut across tokens (and outputs) in order: the short
    # ways (a plain token; characters whole by an output's end) and the decoder's take turns.
    text = "Él miró al mar; 海は静かだった. \"Look,\" she said — ok 🙂 done"
    ids = vllm_tokenizer.encode(text, add_special_tokens=False)
    assert any(i in partial for i in ids)
    for size in (1, 2, 3):
        compare([ids[k:k + size] for k in range(0, len(ids), size)], False)
        compare([ids[k:k + size] for k in range(0, len(ids), size)], True)


def test_the_table_leaves_vllm_the_runs_it_cannot_spell(vllm_tokenizer, table, partial):
    prompt = vllm_tokenizer.encode("Hi")
    assert table.spelling(prompt, "DELTA", []) is not None
    assert table.spelling(prompt, "DELTA", ["\n"]) is None  # vLLM finds stop strings in its own text
    lead = next(i for i in partial if table.bytes_of(i) in (b"\xe2", b"\xf0"))
    assert table.spelling([*prompt, lead], "DELTA", []).pending == table.bytes_of(lead)  # spelled from inside it


def test_a_prompt_that_ends_inside_a_character_reads_as_vllms_text_without_the_prompts_echo(vllm_tokenizer, table):
    """A branch from a point inside a character sends a prompt that ends inside it. vLLM's fast
    detokenizer then puts the whole prompt's text before a sample's first text (vLLM issue #48853);
    the table spells what it would have written without that echo: the character the sample
    completes, then the rest. ``PromptEcho`` takes the echo off vLLM's own texts (a run with stop
    strings) alike, for every output_kind and any cut of the tokens into outputs."""
    from playground.backends.outputs import PromptEcho

    ids = vllm_tokenizer.encode("Q: 日本の首都は東京です 🙂 ok", add_special_tokens=False)
    head = vllm_tokenizer.encode("Say it:")
    cuts = [k for k in range(1, len(ids)) if table.pending(head + ids[:k])]
    assert len(cuts) >= 4  # several points inside a character
    for k in cuts:
        prompt, rest = head + ids[:k], ids[k:]
        assert table.echo(prompt) == vllm_tokenizer.decode(prompt).rstrip("\ufffd")
        for size in (1, 2):
            for kind, delta in (("DELTA", True), ("CUMULATIVE", False), ("FINAL_ONLY", False)):
                chunks = [rest] if kind == "FINAL_ONLY" else [rest[j:j + size] for j in range(0, len(rest), size)]
                vllms = vllm_texts(vllm_tokenizer, prompt, chunks, False, delta)
                assert any(t.startswith(table.echo(prompt)) for t in vllms), "vLLM no longer echoes the prompt"
                echo = PromptEcho(table.echo(prompt), cumulative=not delta)
                without = [echo.text(0, t) for t in vllms]
                spelling, seen, spelled = table.spelling(prompt, kind, []), [], []
                for chunk in chunks:
                    seen += chunk
                    spelled.append(spelling.read(0, chunk if delta else list(seen), None)[0])
                assert spelled == without, (k, kind, size)
                whole = without[-1] if not delta else "".join(without)  # the character the prompt began, then on
                assert whole == vllm_tokenizer.decode(prompt + rest)[len(table.echo(prompt)):], (k, kind)
                stream = table.stream(table.pending(prompt))
                assert "".join(stream.add(rest)) == whole  # the record's pieces read the same


@pytest.mark.parametrize("output_kind", ["DELTA", "FINAL_ONLY"])  # CUMULATIVE: the LLMEngine's test below
def test_a_real_run_reads_the_same_spelled_or_detokenized(backend, output_kind):
    """The same seeded run, its texts made from the table and by vLLM (a run the QA matrix
    watches keeps vLLM's detokenizer): hot sampling in a script with many multibyte characters,
    samples ending by EOS or by length."""
    request = SampleRequest("Écris trois mots en japonais, avec des emoji 😀 :", n=8, seed=11, max_tokens=24,
                            temperature=1.3, output_kind=output_kind, mode="native", use_chat_template=True,
                            logprobs=2)
    spelled, detokenized = taken_alike(lambda: (record_to_end(backend, request),
                                                record_to_end(backend, request, watch=True)))
    assert [s.token_ids for s in spelled.samples] == [s.token_ids for s in detokenized.samples]
    assert [s.text for s in spelled.samples] == [s.text for s in detokenized.samples]
    assert [s.token_texts for s in spelled.samples] == [s.token_texts for s in detokenized.samples]
    assert any(ord(c) > 0x7F for s in spelled.samples for c in s.text)  # the multibyte path was taken


def test_the_llmengine_front_end_spells_as_its_own_detokenizer_writes(sync_engine):
    """The same on the synchronous front end (``SyncRunner``), whose QA runs (``watch``) keep
    vLLM's detokenizer."""
    from playground.backends.sync import SyncRunner

    runner = SyncRunner(sync_engine)
    request = SampleRequest("Écris un haïku avec des emoji 🌸 :", n=4, seed=5, max_tokens=20, temperature=1.3,
                            output_kind="CUMULATIVE", use_chat_template=True)
    spelled, detokenized = taken_alike(lambda: (runner.record(request), runner.record(request, watch=True)))
    assert [s.token_ids for s in spelled.samples] == [s.token_ids for s in detokenized.samples]
    assert [s.text for s in spelled.samples] == [s.text for s in detokenized.samples]
    for run in (spelled, detokenized):  # each index's last CUMULATIVE output holds its whole text
        last = {o.index: o.text for e in run.events for o in e.outputs}
        assert [last[s.index] for s in run.samples] == [s.text for s in spelled.samples]
