"""The contenders, the paths being compared: ``native`` and ``wrapper`` (ParallelSampler on the engine),
``ui`` (a gradio_client call to ``/sample``) and ``hf`` (HF transformers), each a callable that
samples n and returns the token ``Arrivals`` (the fifth, ``limit``, is in ``limit``).

Fairness caveats (also written into the results):
- threads: HF gets as many torch threads as the engine computes with, on the same cores
  (``playground.backends.resources``: on a small machine every usable core, not pinned; with
  vLLM's own binding, the worker's cores, and the calling thread is pinned to them while it
  generates), so ``native/hf`` compares engines, not core counts. ``--hf-threads N`` runs N
  threads unpinned instead. The engine idles while HF runs. So does the machine's limit
  (``limit``), which gets the same threads and cores.
- dtype: both run the same one: HF loads whatever dtype the engine runs (``--hf-dtype``
  overrides). On a CPU without native bf16 that is float32 (playground.backends.engine.platform_defaults).
- HF seeds one generator for the whole batch (torch.manual_seed(seed)); vLLM seeds each sample.
  Token streams differ; the number of tokens does not.
- HF's ``num_return_sequences`` copies the prompt n times and prefills every copy; vLLM prefills
  it once and the children read it from the prefix cache. That is a real difference between the
  two, and ``--long-prompt`` shows how much it weighs.
- The API client runs in this process (polling every few ms), beside the server it measures.
- Memory: the engine's KV cache is sized as the app sizes it (``--max-n`` 32, ``--concurrency`` 8,
  see ``playground.backends.resources``), so the memory measures are the app's.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable

from playground.bench.measure import Arrivals, Settings
from playground.bench.probes import engine_threads, prefix_cache_hits

UI_POLL = 0.005  # seconds between looks at the API client's received outputs


def engine_path(host, mode: str, settings: Settings, prompt_ids: list[int]) -> Callable[..., Arrivals]:
    """Native or wrapper: ParallelSampler on the engine's own loop, timed there."""
    from vllm import SamplingParams, TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    from playground.sampling.async_sampler import ParallelSampler

    async def sample(n: int, max_tokens: int, ids: list[int]) -> Arrivals:
        engine = host.engine
        await engine.reset_prefix_cache()
        sampler = ParallelSampler(engine, max_n=max(n, 1))
        params = SamplingParams(n=n, seed=settings.seed, temperature=settings.temperature, top_p=1.0, top_k=0,
                                max_tokens=max_tokens, ignore_eos=True,
                                output_kind=RequestOutputKind[settings.output_kind])
        cumulative = settings.output_kind == "CUMULATIVE"
        times: list[list[float]] = [[] for _ in range(n)]
        cached: list[int | None] = [None] * n

        def on_child(index: int, output) -> None:
            if cached[index] is None:
                cached[index] = output.num_cached_tokens

        hits = prefix_cache_hits()
        tokens = TokensPrompt(prompt_token_ids=ids)
        request_id = f"bench-{mode}-{time.monotonic_ns()}"
        start = time.monotonic()
        async for output in sampler.generate(tokens, params, request_id, mode,
                                             on_child=on_child if mode == "wrapper" else None):
            now = time.monotonic() - start
            for completion in output.outputs:
                seen = times[completion.index]
                new = len(completion.token_ids) - (len(seen) if cumulative else 0)
                seen.extend([now] * new)
        wall = time.monotonic() - start
        after = prefix_cache_hits()
        return Arrivals(times, wall, child_cached=cached if mode == "wrapper" else None,
                        cache_hits=after - hits if hits is not None and after is not None else None)

    def run(n: int, max_tokens: int | None = None, ids: list[int] | None = None) -> Arrivals:
        return host.run(sample(n, max_tokens or settings.max_tokens, ids or prompt_ids))

    return run


def ui_path(host, app_url: str, settings: Settings) -> Callable[..., Arrivals]:
    """A gradio_client streaming call to /sample; token arrivals are read from its snapshots."""
    from gradio_client import Client

    from playground.run import Run

    client = Client(app_url, verbose=False)

    def run(n: int, max_tokens: int | None = None) -> Arrivals:
        host.run(host.engine.reset_prefix_cache())
        hits = prefix_cache_hits()
        times: list[list[float]] = [[] for _ in range(n)]
        start = time.monotonic()
        job = client.submit(prompt=settings.prompt, n=n, seed=settings.seed, output_kind=settings.output_kind,
                            mode=settings.ui_mode, temperature=settings.temperature, top_p=1.0, top_k=0,
                            max_tokens=max_tokens or settings.max_tokens, ignore_eos=True,
                            use_chat_template=False, logprobs=None, api_name="/sample")  # as the engine paths
        read = 0
        while True:
            done = job.done()
            outputs = job.outputs()
            now = time.monotonic() - start
            for value in outputs[read:]:
                snapshot = json.loads(value)
                for s in snapshot.get("samples", []) if "bundle_version" not in snapshot else []:
                    seen = times[s["index"]]
                    seen.extend([now] * (s["num_tokens"] - len(seen)))
            read = len(outputs)
            if done:
                break
            time.sleep(UI_POLL)
        final = Run.from_json(job.result())
        wall = time.monotonic() - start
        for s in final.samples:  # tokens that arrived with the final bundle
            times[s.index].extend([wall] * (len(s.token_ids) - len(times[s.index])))
        after = prefix_cache_hits()
        return Arrivals(times, wall, cache_hits=after - hits if hits is not None and after is not None else None)

    run.close = client.close  # type: ignore[attr-defined]
    return run


class HFBaseline:
    """HF transformers ``generate(num_return_sequences=n)`` on the engine's checkpoint, with
    ``threads`` torch threads on the cores in ``pin`` (None: unpinned), set around each call only,
    so the rest of this process (the engine's front end, the app) keeps its own setting."""

    def __init__(self, model_path: str, dtype: str, threads: int, pin: list[int] | None = None):
        import torch
        from transformers import AutoModelForCausalLM

        self.dtype, self.threads, self.pin = dtype, threads, pin
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype)).eval()

    def __call__(self, n: int, max_tokens: int, prompt_ids: list[int], settings: Settings) -> Arrivals:
        import torch
        from transformers.generation.streamers import BaseStreamer

        steps: list[float] = []

        class Clock(BaseStreamer):
            """Stamps each decoding step; the first put is the prompt itself."""

            def __init__(self):
                self.prompt_seen = False

            def put(self, value):
                if self.prompt_seen:
                    steps.append(time.monotonic())
                self.prompt_seen = True

            def end(self):
                pass

        ids = torch.tensor([prompt_ids])
        with engine_threads(self.threads, self.pin):
            torch.manual_seed(settings.seed)
            start = time.monotonic()
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                    temperature=settings.temperature, top_p=1.0, top_k=0, num_return_sequences=n,
                    max_new_tokens=max_tokens, min_new_tokens=max_tokens, streamer=Clock(),
                    pad_token_id=self.model.generation_config.eos_token_id)
            wall = time.monotonic() - start
        generated = out.shape[1] - len(prompt_ids)
        step_times = [t - start for t in steps][:generated]
        return Arrivals([list(step_times) for _ in range(n)], wall)

    def close(self) -> None:
        self.model = None
        gc.collect()
