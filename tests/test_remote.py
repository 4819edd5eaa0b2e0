"""The remote backend against a real vLLM server (and, for failures a real server will not
produce on demand, a small fake one).

The session's server is started here (or PLAYGROUND_REMOTE_URL names one to use instead). One
test kills that server mid-stream, so it is marked destructive and runs after every other test
(the QA matrix's remote cells use the server too); it is skipped when the server is not ours to kill.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from playground.backends.base import prepare
from playground.backends.remote import convert
from playground.backends.remote.backend import OUTPUT_KIND_SOURCE, RemoteBackend
from playground.backends.remote.convert import ClientViews, TokenTexts
from playground.backends.remote.server import HEALTH_TIMEOUT, metric_total
from playground.commands.cli import add_remote_flags, create_remote_backend
from playground.errors import RemoteError
from playground.request import SampleRequest
from tests.helpers import assert_refused_clearly, free_port, record_to_end, wait_until

PROMPT = "Write a short poem about the sea:"
KINDS = ["DELTA", "CUMULATIVE", "FINAL_ONLY"]


def connect(url: str, **options) -> RemoteBackend:
    """A RemoteBackend on ``url``, connected as the commands do: on a loop of its own."""
    return asyncio.run(RemoteBackend.connect(url, **options))


def run_request(backend, **settings):
    """Record one request on PROMPT to the end and return the finished Run: a plain completion,
    without logprobs unless ``settings`` ask for them."""
    return record_to_end(backend, SampleRequest(prompt=PROMPT, **{"use_chat_template": False, "logprobs": None,
                                                                  **settings}))


def first_divergence(got, expected, got_name: str, expected_name: str) -> str | None:
    """None if every sample has the same token ids; else where the first one differs."""
    for a, b in zip(got.samples, expected.samples):
        if a.token_ids != b.token_ids:
            k = next((k for k, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y),
                     min(len(a.token_ids), len(b.token_ids)))
            return (f"sample {a.index} (seed {a.seed}) diverges at token {k}: {got_name} "
                    f"{a.token_ids[k:k + 1]} {a.text!r} vs {expected_name} {b.token_ids[k:k + 1]} {b.text!r}")
    return None


def check_sample_record(run, max_tokens: int, logprobs: int | None = None) -> None:
    """What every finished remote run must hold, whatever its output_kind."""
    assert run.status == "finished", run.error
    assert run.engine["backend"] == "openai"
    assert run.engine["output_kind_source"] == OUTPUT_KIND_SOURCE
    assert [e.finished for e in run.events].count(True) == 1 and run.events[-1].finished
    assert run.usage["completion_tokens"] == sum(len(s.token_ids) for s in run.samples)
    for s in run.samples:
        assert s.finish_reason in ("length", "stop")
        assert 0 < len(s.token_ids) <= max_tokens
        assert len(s.token_texts) == len(s.token_ids) == len(s.token_times)
        assert "".join(s.token_texts) == s.text
        if logprobs is None:
            assert s.logprobs is None
            continue
        assert [lp.token_id for lp in s.logprobs] == s.token_ids
        for lp in s.logprobs:
            top_ids = [tid for tid, _, _ in lp.top]
            values = [value for _, value, _ in lp.top]
            assert values == sorted(values, reverse=True)
            assert lp.token_id in top_ids and len(lp.top) <= logprobs + 1
            assert dict((tid, v) for tid, v, _ in lp.top)[lp.token_id] == lp.logprob
            assert all(text is not None for _, _, text in lp.top) and lp.text is not None
            if lp.rank is not None:
                assert top_ids[lp.rank - 1] == lp.token_id and lp.rank <= logprobs


# -- tests on the real server -----------------------------------------------------------------------

def test_info_and_limits_describe_the_server(remote, model_path):
    info = remote.info()
    assert info["backend"] == "openai" and info["device"] == "remote" and info["up"] is True
    assert info["has_chat_template"] is True  # SmolLM2-Instruct's tokenizer has one
    assert asyncio.run(remote.status()) == info  # a health check that the server answers
    assert info["base_url"] == remote.base_url
    assert info["max_model_len"] == remote.limits.max_model_len == 2048
    assert info["output_kind_source"] == OUTPUT_KIND_SOURCE
    assert remote.limits.max_logprobs == 20 and "assumed" in info["max_logprobs_source"]
    if not os.environ.get("PLAYGROUND_REMOTE_URL"):
        import vllm

        assert info["model"] == model_path and info["vllm_version"] == vllm.__version__


def test_prompts_render_as_on_the_embedded_engine(remote, host):
    from playground.backends.embedded import EmbeddedBackend

    embedded = EmbeddedBackend(host, max_n=8)
    for chat in (False, True):
        assert asyncio.run(remote.render(PROMPT, chat)) == embedded.render_prompt(PROMPT, chat)


def test_seeded_wrapper_samples_equal_the_embedded_engines(remote, host):
    """Same request, same seeds, each on an otherwise idle engine: the same tokens, or the
    failure names the first diverging token and sample."""
    from playground.backends.embedded import EmbeddedBackend

    settings = dict(n=4, seed=1234, max_tokens=12, temperature=1.0, output_kind="DELTA", mode="wrapper", logprobs=2)
    over_http = run_request(remote, **settings)
    embedded = run_request(EmbeddedBackend(host, max_n=8), **settings)
    assert over_http.request["prompt_token_ids"] == embedded.request["prompt_token_ids"]
    assert [s.seed for s in over_http.samples] == [1234, 1235, 1236, 1237]
    divergence = first_divergence(over_http, embedded, "remote", "embedded")
    assert divergence is None, divergence
    for a, b in zip(over_http.samples, embedded.samples):
        assert (a.text, a.finish_reason, a.token_texts) == (b.text, b.finish_reason, b.token_texts)
        for x, y in zip(a.logprobs, b.logprobs):
            assert x.logprob == pytest.approx(y.logprob, abs=1e-3)
            assert {tid for tid, _, _ in x.top} == {tid for tid, _, _ in y.top}
            assert x.text == y.text


def test_native_n_goes_to_the_server(remote):
    native = run_request(remote, n=4, seed=99, max_tokens=10, output_kind="DELTA", mode="native")
    check_sample_record(native, 10)
    assert sorted({o.index for e in native.events for o in e.outputs}) == [0, 1, 2, 3]
    assert len({tuple(s.token_ids) for s in native.samples}) == 4  # temperature 1: four different samples
    assert native.usage["requests"] == 1
    assert native.usage["prompt_tokens"] == native.request["num_prompt_tokens"]  # one prompt for all n
    # vLLM's own fan-out on the server and ours over HTTP: child i is seeded seed+i in both.
    wrapper = run_request(remote, n=4, seed=99, max_tokens=10, output_kind="DELTA", mode="wrapper")
    assert wrapper.usage["requests"] == 4
    assert wrapper.usage["prompt_tokens"] == 4 * wrapper.request["num_prompt_tokens"]
    divergence = first_divergence(wrapper, native, "wrapper", "native")
    assert divergence is None, divergence


def test_same_seed_mode_repeats_one_sample(remote):
    run = run_request(remote, n=3, seed=5, max_tokens=8, output_kind="DELTA", mode="same-seed")
    check_sample_record(run, 8)
    assert [s.seed for s in run.samples] == [5, 5, 5]
    assert run.samples[0].token_ids == run.samples[1].token_ids == run.samples[2].token_ids


def test_output_kinds_are_client_side_views_of_one_stream(remote):
    runs = {kind: run_request(remote, n=3, seed=42, max_tokens=6, output_kind=kind, logprobs=2) for kind in KINDS}
    for kind, run in runs.items():
        check_sample_record(run, 6, logprobs=2)
        final = {s.index: (s.text, s.token_ids) for s in run.samples}
        if kind == "FINAL_ONLY":
            [event] = run.events
            assert event.finished and [o.index for o in event.outputs] == [0, 1, 2]
            assert {o.index: (o.text, o.token_ids) for o in event.outputs} == final
            continue
        assert all(len(e.outputs) == 1 for e in run.events)  # one event per raw chunk
        seen: dict[int, tuple[str, list[int]]] = {}
        for event in run.events:
            [out] = event.outputs
            text, ids = seen.get(out.index, ("", []))
            if kind == "DELTA":
                seen[out.index] = (text + out.text, ids + out.token_ids)
            else:  # CUMULATIVE: the index's whole text so far, growing
                assert out.token_ids[: len(ids)] == ids and out.text.startswith(text)
                seen[out.index] = (out.text, out.token_ids)
        assert seen == final
    for kind in ("CUMULATIVE", "FINAL_ONLY"):
        divergence = first_divergence(runs[kind], runs["DELTA"], kind, "DELTA")
        assert divergence is None, divergence


@pytest.mark.parametrize("how", ["aclose", "cancel"])
def test_closing_the_stream_aborts_the_servers_requests(remote, how):
    """Stop closes the HTTP streams; the server must then abort the requests, not finish them."""

    async def go():
        # ran on to max_tokens: vLLM counts an aborted request as a success too, finished_reason "abort"
        finished_before = metric_total(await remote.metrics(), "vllm:request_success_total", finished_reason="length")
        request = SampleRequest(prompt=PROMPT, n=4, seed=3, max_tokens=400, ignore_eos=True, output_kind="DELTA")
        stream = remote.stream(prepare(remote.limits, request, await remote.render(request.prompt, False)))
        started = asyncio.Event()

        async def consume():
            seen = set()
            async for observation in stream:
                if observation.event is not None:
                    seen.update(o.index for o in observation.event.outputs)
                if len(seen) == 4:
                    started.set()  # every child is generating on the server
                    if how == "aclose":
                        return  # stop reading; the stream is closed below

        task = asyncio.ensure_future(consume())
        waiter = asyncio.ensure_future(started.wait())
        await asyncio.wait({task, waiter}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
        assert started.is_set(), task.exception() if task.done() else "not every sample started within 120 s"
        running = await remote.num_unfinished()
        if how == "aclose":
            await task
            await stream.aclose()
        else:  # the UI's Stop: the handler's task is cancelled while it waits for the next chunk
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        closed = time.monotonic()
        while await remote.num_unfinished() and time.monotonic() - closed < 3:
            await asyncio.sleep(0.05)
        left, elapsed = await remote.num_unfinished(), time.monotonic() - closed
        finished_after = metric_total(await remote.metrics(), "vllm:request_success_total", finished_reason="length")
        return running, left, elapsed, finished_after - finished_before

    running, left, elapsed, finished = asyncio.run(go())
    assert running == 4
    assert left == 0, f"{left} requests still running {elapsed:.1f} s after the stream was closed"
    assert finished == 0  # none ran on to its 400 tokens: the server aborted them


@pytest.mark.parametrize("kind", KINDS)
def test_a_stop_keeps_each_samples_tokens_and_the_server_aborts(remote, kind):
    """Stop on the remote backend does what its server allows: the OpenAI API has no abort by id,
    so the streams are closed (the server aborts those requests) and the last output, each
    sample's tokens so far with finish_reason "abort", is built on the client, for every
    output_kind (FINAL_ONLY had shown nothing before it)."""
    from playground.backends.live import LiveRun, State
    from tests.helpers import await_until

    async def go():
        before = await _server_tokens(remote)
        live = await LiveRun.plan(remote, SampleRequest(prompt=PROMPT, n=3, seed=4, max_tokens=1500, ignore_eos=True,
                                                        output_kind=kind, logprobs=2))

        async def follow():
            async for _ in live.follow(remote):
                pass

        task = asyncio.ensure_future(follow())
        # The server made a few tokens for every sample, whatever this output_kind has shown of them.
        assert await await_until(lambda: live.run is not None, 60)
        while await _server_tokens(remote) - before < 9 and not task.done():
            await asyncio.sleep(0.05)
        run = await live.stop_and_wait()
        await task
        assert live.state is State.STOPPED and not live.going
        closed = time.monotonic()
        while await remote.num_unfinished() and time.monotonic() - closed < 3:
            await asyncio.sleep(0.05)
        return run, await remote.num_unfinished()

    run, left = asyncio.run(go())
    assert run.status == "aborted" and left == 0
    assert all(s.finish_reason == "abort" and s.token_ids and len(s.logprobs or []) == len(s.token_ids)
               for s in run.samples), [(s.finish_reason, len(s.token_ids)) for s in run.samples]
    assert run.events[-1].finished and "abort_source" in run.engine


async def _server_tokens(remote) -> float:
    return metric_total(await remote.metrics(), "vllm:generation_tokens_total") or 0.0


def test_a_client_side_abort_ends_each_view_as_asyncllm_does():
    """The views the remote backend builds from DELTA chunks, ended by an abort: DELTA gives no new
    tokens, CUMULATIVE each sample's whole text, FINAL_ONLY its one event with all n as they stand."""
    for kind in KINDS:
        views = ClientViews(3, kind)
        views.add(0.1, 0, " a", [1], [" a"], None, None, None)
        views.add(0.2, 1, " b", [2], [" b"], None, "length", None)
        views.add(0.3, 0, " c", [3], [" c"], None, None, None)
        ended = views.abort(0.4)
        last = ended[-1].event
        assert last.finished and views.finished
        outputs = {o.index: (o.text, o.token_ids, o.finish_reason) for e in ended for o in e.event.outputs}
        if kind == "DELTA":
            assert outputs == {0: ("", [], "abort"), 2: ("", [], "abort")}
        elif kind == "CUMULATIVE":
            assert outputs == {0: (" a c", [1, 3], "abort"), 2: ("", [], "abort")}
        else:
            assert len(ended) == 1
            assert outputs == {0: (" a c", [1, 3], "abort"), 1: (" b", [2], "length"), 2: ("", [], "abort")}


def test_a_branch_goes_to_the_server_as_token_ids_and_continues_a_greedy_sample(remote):
    """Branching on the remote path: the rendered prompt's ids and a sample's first k tokens go to
    the server as one token-id prompt; at temperature 0 the branch continues with the sample's own
    token k, and the record keeps the prompt and the prefix apart, as on the embedded engine."""
    from playground import analysis as A

    greedy = run_request(remote, n=1, temperature=0, max_tokens=8, ignore_eos=True)
    tokens = greedy.samples[0].token_ids
    for k in (0, 5):
        branch = run_request(remote, n=1, temperature=0, max_tokens=2,
                             prefix_token_ids=A.branch_prefix(greedy, 0, k) or None)
        assert branch.request["prompt_token_ids"] == greedy.request["prompt_token_ids"]
        assert branch.request["prefix_token_ids"] == (tokens[:k] or None)
        assert branch.samples[0].token_ids == tokens[k:k + 2]  # only the new tokens, the sample's own
    forced = run_request(remote, n=3, seed=9, max_tokens=2, prefix_token_ids=[*tokens[:5], tokens[5] + 1])
    assert forced.request["prefix_token_ids"][-1] == tokens[5] + 1
    assert [s.seed for s in forced.samples] == [9, 10, 11] and all(len(s.token_ids) == 2 for s in forced.samples)


def test_a_token_id_the_server_does_not_know_gives_its_message_and_the_next_request_works(remote):
    with pytest.raises(RemoteError) as error:  # the remote backend does not know the vocabulary: the server says
        run_request(remote, n=2, seed=1, max_tokens=4, prefix_token_ids=[1, 10**8])
    assert remote.base_url in str(error.value) and "100000000" in str(error.value), str(error.value)
    assert run_request(remote, n=2, seed=1, max_tokens=4).status == "finished"


def test_logprobs_above_the_servers_limit_give_its_message(remote_server):
    generous = connect(remote_server.url, max_n=8, max_logprobs=50)  # let the server judge
    with pytest.raises(RemoteError) as error:
        run_request(generous, n=2, seed=1, max_tokens=4, logprobs=30)
    message = str(error.value)
    assert remote_server.url in message and "greater than max allowed: 20" in message


def test_a_model_the_server_does_not_serve(remote_server, remote):
    with pytest.raises(RemoteError, match="does not serve 'no-such-model'; it serves: "):
        connect(remote_server.url, model="no-such-model")
    wrong = connect(remote_server.url)
    wrong.model = "no-such-model"  # as if the server had swapped models after we connected
    with pytest.raises(RemoteError) as error:
        run_request(wrong, n=2, seed=1, max_tokens=4)
    assert "HTTP 404" in str(error.value) and "The model `no-such-model` does not exist" in str(error.value)


def test_cli_flags_build_a_remote_backend(remote_server, monkeypatch):
    from playground.commands.cli import PlaygroundParser

    parser = PlaygroundParser("app.py", "test", add_remote_flags)  # no clash with vLLM's own flags
    args, _ = parser.parse(["--backend", "openai", "--base-url", remote_server.url, "--request-timeout", "7.5"])
    assert (args.backend, args.request_timeout, args.api_key) == ("openai", 7.5, None)
    monkeypatch.setenv("VLLM_API_KEY", "from-the-environment")
    backend = create_remote_backend(args, max_n=6)
    assert backend.api_key == "from-the-environment" and backend.limits.max_n == 6
    assert backend.request_timeout == 7.5
    args, _ = parser.parse(["--backend", "openai"])
    with pytest.raises(RemoteError, match="needs --base-url"):
        create_remote_backend(args, max_n=6)


# -- conversions, without a server (cases a real server does not produce on demand) ---------------

def test_a_chunk_of_several_tokens_gets_one_piece_per_token():
    texts = {1: "He", 2: "llo", 3: "\ufffd"}
    assert convert.pieces(" a", [5], {}) == [" a"]  # one token: the chunk's text is its piece
    assert convert.pieces("Hello", [1, 2], texts) == ["He", "llo"]
    assert convert.pieces("Hé", [1, 3], texts) == ["", "Hé"]  # alone they do not add up: the last token


def test_a_sampled_token_outside_the_top_k_has_no_rank():
    texts = {1: "a", 2: "b", 7: "z"}
    [inside] = convert.token_logprobs([(2, -0.5, [(1, -0.1), (2, -0.5)])], 2, texts)
    [outside] = convert.token_logprobs([(7, -3.0, [(1, -0.1), (2, -0.5), (7, -3.0)])], 2, texts)
    assert (inside.rank, outside.rank) == (2, None)
    assert outside.top == [(1, -0.1, "a"), (2, -0.5, "b"), (7, -3.0, "z")] and outside.text == "z"


def test_token_texts_asks_the_server_once_per_token():
    asked = []

    async def decode_one(token_id: int) -> str:
        asked.append(token_id)
        return f"<{token_id}>"

    async def twice(cache: TokenTexts):
        return await cache.texts([1, 2, 2], decode_one), await cache.texts([2, 3], decode_one)

    first, second = asyncio.run(twice(TokenTexts()))
    assert first == {1: "<1>", 2: "<2>"} and second == {2: "<2>", 3: "<3>"}
    assert sorted(asked) == [1, 2, 3]


# -- failures, on no server or a fake one -----------------------------------------------------------

def test_a_wrong_base_url_names_the_server():
    url = f"http://127.0.0.1:{free_port()}/v1"
    started = time.monotonic()
    with pytest.raises(RemoteError) as error:
        connect(url, request_timeout=5)
    assert url in str(error.value) and "connection refused" in str(error.value)
    assert time.monotonic() - started < 5


def test_a_base_url_with_another_path_says_what_the_address_is(remote_server):
    """`.../v2` or `.../v1/completions` given for the server's address: its 404 says which part of
    the address was read how, so the URL it names (never typed) makes sense."""
    root = remote_server.url.rstrip("/").removesuffix("/v1")
    with pytest.raises(RemoteError) as error:
        connect(f"{root}/v1/completions")
    said = str(error.value)
    assert "404" in said and "--base-url is the server's address, with or without /v1" in said, said
    assert "here /v1/completions, is read as the prefix of a proxy in front of the server" in said, said


class FakeServer(ThreadingHTTPServer):
    """Just enough of vLLM's API for a RemoteBackend, with a completion endpoint that misbehaves
    on demand: "stall" sends one chunk and then nothing, "shutdown" does so and then fails /health
    (``down``: a server shutting down), "fail" answers HTTP 500. Once ``silent``
    is set, it accepts connections and answers nothing at all; ``held`` counts those requests.
    ``chat=False``: a model without a chat template (vLLM answers such a /tokenize with 400)."""

    daemon_threads = True

    def __init__(self, behaviour: str, api_key: str | None = None, chat: bool = True):
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.behaviour, self.api_key, self.chat = behaviour, api_key, chat
        self.release = threading.Event()
        self.silent = threading.Event()
        self.down = threading.Event()  # /health fails, open streams stay open: a server shutting down
        self.held = 0
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.shutdown()
        self.server_close()

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that left: the backend
            super().handle_error(request, client_address)  # drops health checks it no longer needs


class FakeHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self) -> bool:
        if self.server.api_key and self.headers.get("Authorization") != f"Bearer {self.server.api_key}":
            self.answer(401, {"error": "Unauthorized"})  # what vllm serve --api-key answers
            return False
        return True

    def hold(self) -> bool:
        """A silent server: keep the connection open and answer nothing (until the test ends)."""
        if not self.server.silent.is_set():
            return False
        self.server.held += 1
        self.server.release.wait(60)
        return True

    def do_GET(self):
        if self.hold() or not self.authorized():
            return
        if self.path == "/health" and self.server.down.is_set():
            return self.answer(503, {"error": {"message": "the server is shutting down", "code": 503}})
        answers = {"/v1/models": {"data": [{"id": "fake", "root": "fake", "max_model_len": 2048}]},
                   "/version": {"version": "0-fake"}, "/health": {}}
        self.answer(200, answers.get(self.path, {}))

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or "{}")
        if self.hold() or not self.authorized():
            return
        if self.server.down.is_set():  # gone: new requests fail (the streams open before stay open)
            return self.answer(503, {"error": {"message": "the server is shutting down", "code": 503}})
        if self.path == "/tokenize" and "messages" in body and not self.server.chat:
            message = "Cannot use chat template functions because tokenizer.chat_template is not set"
            return self.answer(400, {"error": {"message": message, "code": 400}})
        if self.path == "/tokenize":
            return self.answer(200, {"tokens": [1, 2, 3], "count": 3, "max_model_len": 2048})
        if self.server.behaviour == "fail":
            return self.answer(500, {"error": {"message": "EngineCore encountered an issue", "code": 500}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": "fake",
                 "choices": [{"index": 0, "text": " a", "token_ids": [5], "finish_reason": None}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()
        if self.server.behaviour == "shutdown":  # SIGTERM now: the stream stays open, /health fails
            self.server.down.set()
        self.server.release.wait(60)  # a server that stopped talking


def test_a_stalled_stream_times_out_with_a_clear_message():
    with FakeServer("stall") as server:
        backend = connect(server.url, request_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(RemoteError) as error:
            run_request(backend, n=2, seed=1, max_tokens=4)
        assert time.monotonic() - started < 10
    assert server.url in str(error.value) and "did not answer within 1 s" in str(error.value)


def test_a_server_shutting_down_mid_run_ends_it_in_seconds_not_at_the_timeout():
    """SIGTERM: vllm serve keeps the open streams open, silent, while /health fails. The stream's
    silence asks /health, and the run ends with its reason, not --request-timeout later."""
    from playground.backends.remote.backend import QUIET_FOR

    with FakeServer("shutdown") as server:
        backend = connect(server.url, request_timeout=60.0)
        started = time.monotonic()
        with pytest.raises(RemoteError) as error:  # one stream: a second, opened after, would be refused
            run_request(backend, n=1, seed=1, max_tokens=4)
        assert time.monotonic() - started < QUIET_FOR + 10
    said = str(error.value)
    assert server.url.removesuffix("/v1") in said and "HTTP 503" in said and "the server is shutting down" in said
    assert said.endswith("while streaming: the server stopped answering, and the run ends with what its samples had")


def test_a_server_error_gives_the_servers_message():
    with FakeServer("fail") as server:
        with pytest.raises(RemoteError) as error:
            run_request(connect(server.url), n=2, seed=1, max_tokens=4)
    assert "HTTP 500" in str(error.value) and "EngineCore encountered an issue" in str(error.value)


def test_a_wrong_api_key_says_so():
    with FakeServer("fail", api_key="right") as server:
        with pytest.raises(RemoteError) as error:
            connect(server.url, api_key="wrong")
        assert asyncio.run(connect(server.url, api_key="right").status())["up"] is True
    assert "HTTP 401" in str(error.value) and "--api-key" in str(error.value) and "Unauthorized" in str(error.value)


def test_a_model_without_a_chat_template_is_described_so():
    with FakeServer("fail", chat=False) as server:
        assert connect(server.url).info()["has_chat_template"] is False
    with FakeServer("fail") as server:
        assert connect(server.url).info()["has_chat_template"] is True


def test_a_silent_server_does_not_hold_up_the_app():
    """The server answers discovery, then accepts connections and answers nothing. While one
    client's /sample waits on it, a second client loads the page and has its /sample refused,
    with a sentence naming the server, within 2 s (the health check's timeout, not the 60 s
    request timeout); the status the page shows then says the server is down."""
    from gradio_client import Client

    from playground.ui import build_app, launch_app

    with FakeServer("stall") as server:
        backend = connect(server.url, request_timeout=60)
        server.silent.set()
        demo = build_app(backend)
        _, url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                               quiet=True)
        try:
            first = Client(url, verbose=False).submit(prompt=PROMPT, n=2, max_tokens=4, api_name="/sample")
            assert wait_until(lambda: server.held, timeout=30), "the first /sample never reached the server"
            assert not first.done()
            assert httpx.get(url, timeout=2).status_code == 200  # the page loads meanwhile
            second = Client(url, verbose=False).submit(prompt=PROMPT, n=1, max_tokens=2, api_name="/sample")
            with pytest.raises(Exception) as refused:
                second.result(timeout=2)
            assert not isinstance(refused.value, TimeoutError), "the second /sample waited more than 2 s"
            assert server.url in str(refused.value)
            assert_refused_clearly(refused.value, f"did not answer its health check within {HEALTH_TIMEOUT:g} s")
            with pytest.raises(Exception, match="health check"):
                first.result(timeout=30)  # the first is refused too, not held for 60 s
            assert backend.info()["up"] is False
        finally:
            demo.close()


def test_run_refused_while_the_server_is_stuck_works_once_it_answers_again(remote_server, remote):
    """The real server stopped (SIGSTOP) for one health check: Run is refused with the check's
    finding and the engine's line says down; once the server goes on, the next press asks again
    and the run is planned, without a reload or another change to the page."""
    if remote_server.process is None:
        pytest.skip("PLAYGROUND_REMOTE_URL names a server that is not ours to stop")
    import signal

    from playground.ui import build_app, running

    page = build_app(remote).playground_page
    form = dict(prompt=PROMPT, n=1, seed="1", max_tokens=2)
    os.kill(remote_server.process.pid, signal.SIGSTOP)
    try:
        refused = asyncio.run(running.begin(page, None, **form))
    finally:
        os.kill(remote_server.process.pid, signal.SIGCONT)
    assert refused[page.action] is None and "✖ engine down" in refused[page.status], refused
    assert f"did not answer its health check within {HEALTH_TIMEOUT:g} s" in refused[page.summary]
    assert refused[page.summary].endswith("Nothing was sent to the engine; press Run again once it answers.")
    assert remote.info()["up"] is False  # as last seen: nothing asks the server until a press
    planned = asyncio.run(running.begin(page, None, **form))
    assert planned[page.action] is not None and planned[page.action].runs[0].state == "queued", planned
    assert remote.info()["up"] is True
    asyncio.run(planned[page.action].stop_and_wait())  # planned, never sent: stopped with nothing in the engine


# -- this kills the session's server: destructive, so it runs after every other test ----------------

@pytest.mark.destructive
def test_the_server_dying_mid_run_is_reported_and_the_app_stays_up(remote_server, remote):
    """Through the app: the /sample call fails with a clear message, the page still answers."""
    if remote_server.process is None:
        pytest.skip("PLAYGROUND_REMOTE_URL names a server that is not ours to kill")
    from gradio_client import Client

    from playground.ui import build_app, launch_app

    demo = build_app(remote)
    _, url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                           quiet=True)
    try:
        client = Client(url, verbose=False)
        job = client.submit(prompt=PROMPT, n=2, seed=5, max_tokens=400, ignore_eos=True, output_kind="DELTA",
                            api_name="/sample")
        started = time.monotonic()
        while not any(json.loads(v).get("samples") and any(s["num_tokens"] for s in json.loads(v)["samples"])
                      for v in job.outputs()):
            assert time.monotonic() - started < 120 and not job.done(), "the run never produced a token"
            time.sleep(0.05)
        remote_server.kill()
        with pytest.raises(Exception) as error:
            job.result(timeout=60)
        assert remote.base_url in str(error.value)
        assert "lost the connection" in str(error.value) or "connection refused" in str(error.value)
        assert httpx.get(url, timeout=10).status_code == 200  # the app stays up
        with pytest.raises(Exception, match="connection refused"):
            client.predict(prompt=PROMPT, n=1, max_tokens=2, api_name="/sample")
        assert remote.info()["up"] is False  # what the UI's engine status shows
    finally:
        demo.close()


def test_a_refusal_for_a_server_that_is_down_gives_its_advice_once_on_the_page():
    """The backend's refusal tells an API caller the request was not run; the page's summary says
    that in its own words, once, after the server's own question mark."""
    from playground.backends.remote.server import Health, HealthWatch
    from playground.ui import views

    asked = "cannot connect to the vLLM server at http://h/v1 while checking its health: connection refused. " \
            "Is `vllm serve` running there?"
    refusal = str(HealthWatch.refusal(Health(False, 0.0, asked)))
    assert refusal == f"{asked} The request was not run; try again once the server answers."
    assert views.refused_summary(refusal, engine_away=True) == (  # its words as text, its code as code
        f"✖ refused: {asked.replace('`vllm serve`', '<code>vllm serve</code>')} Nothing was sent to the engine; "
        "press Run again once it answers.")


def test_a_server_gone_while_the_page_sat_idle_shows_down_as_soon_as_the_prompt_changes():
    """The engine line spoke of the last Run press: a change of the prompt asks the server to
    render it, its health beside, and the line says what that found."""
    from types import SimpleNamespace

    from playground.ui import controls

    with FakeServer("stall") as server:
        backend = connect(server.url)
        page = SimpleNamespace(backend=backend)
        preview, line = asyncio.run(controls.preview_and_status(page, "Hello", False))
        assert "● engine up" in line and "output_kind views client-side (server streams DELTA)" in line
        server.down.set()  # gone meanwhile: /health fails
        preview, line = asyncio.run(controls.preview_and_status(page, "Hello there", False))
    assert "✖ engine down" in line and preview.startswith("⚠️") and "HTTP 503" in preview
