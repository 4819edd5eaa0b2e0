"""The seam between the UI and an engine: the embedded AsyncLLM here, a remote server elsewhere.

A backend checks and renders a request, then streams Observations; ``record()`` turns those into
a live Run. The UI, the benchmark and the QA matrix only ever talk to this seam.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from playground.errors import EngineUnavailable
from playground.request import Limits, SampleRequest, check_context, child_seeds
from playground.run import Observation, Run, RunRecorder


@dataclass
class Prepared:
    """A checked request, rendered and tokenized, with every sample's seed decided."""

    request: SampleRequest
    request_id: str
    rendered_prompt: str
    prompt_token_ids: list[int]
    seeds: list[int | None]

    def record_header(self) -> dict[str, Any]:
        """The ``request`` part of the run bundle."""
        return {
            **self.request.to_dict(),
            "request_id": self.request_id,
            "rendered_prompt": self.rendered_prompt,
            "prompt_token_ids": self.prompt_token_ids,
            "num_prompt_tokens": len(self.prompt_token_ids),
        }


class Backend(Protocol):
    limits: Limits

    def info(self) -> dict[str, Any]: ...

    def render_prompt(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]: ...

    def decode(self, token_ids: list[int]) -> str: ...

    def stream(self, prepared: Prepared) -> AsyncIterator[Observation]: ...

    async def num_unfinished(self) -> int: ...


def prepare(backend: Backend, request: SampleRequest, seed_source=None) -> Prepared:
    """Check everything, render the prompt, and fix the seeds, before the engine sees anything.

    A blank seed becomes a random one here, in every mode, so the run can be replayed and the UI
    can show which seed was used.
    """
    import secrets

    request.check(backend.limits)
    rendered, token_ids = backend.render_prompt(request.prompt, request.use_chat_template)
    check_context(len(token_ids), request.max_tokens, backend.limits.max_model_len)
    if request.seed is None:
        request.seed = (seed_source or secrets.randbelow)(2**31)
    seeds = child_seeds(request.seed, request.n, request.mode)
    return Prepared(request, f"run-{uuid.uuid4().hex[:8]}", rendered, token_ids, seeds)


async def record(backend: Backend, request: SampleRequest) -> AsyncIterator[Run]:
    """Run ``request`` and yield the growing Run after every event; the last one is finished.

    Whatever ends the stream (the end, an error, a Stop, a closed tab) the Run is finished with
    the matching status, and the backend's own cleanup aborts what is still running.
    """
    prepared = prepare(backend, request)
    recorder = RunRecorder(prepared.record_header(), prepared.seeds, backend.info(), backend.decode)
    run = recorder.run
    try:
        # aclosing: when we are closed, the backend's cleanup (aborting children) runs now,
        # not whenever the garbage collector gets to its generator.
        async with contextlib.aclosing(backend.stream(prepared)) as observations:
            async for observation in observations:
                if recorder.observe(observation) is not None:
                    yield run
    except EngineUnavailable as e:
        recorder.finish("error", str(e))
        raise
    except BaseException:
        recorder.finish("aborted", "stopped before the last sample finished")
        raise
    recorder.finish()
    yield run
