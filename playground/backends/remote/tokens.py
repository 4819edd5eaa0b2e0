"""Each token's text decoded alone, as vLLM decodes logprob tokens, asked of the server once.

A remote run needs single-token texts for the logprob alternatives and for chunks that carry
several tokens. The server decodes them (/detokenize, one token per request, since it decodes a
list as one string); the answers are kept for the backend's life. That is at most the vocabulary,
so after its first runs a session pays one small request per token it has not seen yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

DECODE_CONCURRENCY = 8  # /detokenize requests in flight at once, per call


class TokenTexts:
    """token id -> its text decoded alone. Plain data, so any event loop may fill and read it."""

    def __init__(self, concurrency: int = DECODE_CONCURRENCY):
        self.concurrency = concurrency
        self._text: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._text)

    async def texts(self, token_ids: Iterable[int], decode_one: Callable[[int], Awaitable[str]]) -> dict[int, str]:
        """The text of every id in ``token_ids``; ``decode_one`` asks the server for the missing.
        If one request fails, the others are cancelled and that failure is raised."""
        wanted = set(token_ids)
        missing = [t for t in wanted if t not in self._text]
        if missing:
            gate = asyncio.Semaphore(self.concurrency)  # made per call: it belongs to this loop

            async def fetch(token_id: int) -> None:
                async with gate:
                    self._text[token_id] = await decode_one(token_id)

            fetches = [asyncio.ensure_future(fetch(t)) for t in missing]
            try:
                await asyncio.gather(*fetches)
            finally:
                for task in fetches:
                    task.cancel()
                await asyncio.gather(*fetches, return_exceptions=True)
        return {t: self._text[t] for t in wanted}
