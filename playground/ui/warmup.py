"""Warm the engine's lazily compiled paths before the page serves its first run.

vLLM compiles its logprobs kernel (``batched_count_greater_than``, a ``torch.compile``d function)
on the first request that asks for logprobs, not at engine start. The page asks for logprobs by
default, so its first run after start paid that compile: its first text came after 11 s instead
of 1.3 s. Measured on the engine alone, the first request with logprobs took 4.9 s to its first
token (36 s on a loaded machine), the next 0.2 s; a request without logprobs 0.2 s.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from playground.backends.base import record
from playground.sampling.request import SampleRequest

log = logging.getLogger(__name__)
SIZES = (2, 1)  # batch sizes: compiled for the first, and checked not to recompile for the other


def warm_up(backend, logprobs: int) -> None:
    """Sample a two-token request with the page's logprobs at each of SIZES, on this backend.

    A remote server compiles on its own side (and may be slow or down), so it is left alone.
    A failure here is logged and left for the first run to report.
    """
    if backend.info().get("backend") == "openai" or not logprobs:
        return

    async def sample(n: int) -> None:
        request = SampleRequest(prompt="Hello", n=n, seed=0, max_tokens=2, logprobs=logprobs)
        async for _ in record(backend, request):
            pass

    async def both() -> None:
        for n in SIZES:
            await sample(n)

    try:
        with ThreadPoolExecutor(1) as pool:  # a loop of its own, even when called from inside one
            pool.submit(asyncio.run, both()).result()
    except Exception:
        log.warning("warming up the engine failed; the first run will report why", exc_info=True)
