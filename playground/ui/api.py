"""``/sample``: the app's API for scripts (gradio_client). Streams progress snapshots as JSON; its
final value is the run bundle. It belongs to no browser session, so it touches no page state.
A call that is cancelled (or whose client goes away) stops its run as the page's Stop does: the
run is aborted by its parent id, so nothing of it is left running in the engine."""

from __future__ import annotations

import contextlib
import json

from playground.run import Run
from playground.sampling.request import SampleRequest
from playground.ui.live import LiveRun
from playground.ui.messages import shown
from playground.ui.streaming import paced


class SampleAPI:
    def __init__(self, backend):
        self.backend = backend

    async def sample(self, prompt: str, n: int = 4, seed: int | None = None, output_kind: str = "CUMULATIVE",
                     mode: str = "wrapper", temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                     max_tokens: int = 64, stop: list[str] | None = None, logprobs: int | None = None,
                     use_chat_template: bool = False, ignore_eos: bool = False) -> str:
        """Sample n completions. Streams progress snapshots as JSON; the final value is the run bundle."""
        try:
            sample_request = SampleRequest.from_user(
                prompt=prompt, n=n, seed=seed, output_kind=output_kind, mode=mode, temperature=temperature,
                top_p=top_p, top_k=top_k, max_tokens=max_tokens, stop=stop, logprobs=logprobs,
                use_chat_template=use_chat_template, ignore_eos=ignore_eos)
            latest = None
            # aclosing: a cancelled call aborts its run now, not when the generator is collected.
            stream = paced(LiveRun(sample_request).follow(self.backend), interval=0.25)
            async with contextlib.aclosing(stream) as snapshots:
                async for run in snapshots:
                    latest = run or latest  # a heartbeat (None) repeats the last progress
                    if latest is not None and latest.finished:
                        yield latest.to_json()
                        return
                    yield json.dumps(progress(latest))
        except Exception as e:
            raise shown(e) from None


def progress(run: Run | None) -> dict:
    if run is None:
        return {"status": "running", "samples": []}
    return {"status": run.status, "request_id": run.request.get("request_id"),
            "samples": [{"index": s.index, "seed": s.seed, "text": s.text, "num_tokens": len(s.token_ids),
                         "finish_reason": s.finish_reason} for s in run.samples]}
