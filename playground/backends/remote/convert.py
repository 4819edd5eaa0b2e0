"""Between the playground's records and vLLM's completions API, both ways.

Out: a Prepared parent request becomes its completion requests. The children and their seeds
come from the fan-out plan (``prepared.children``): wrapper and same-seed send one request per
child with n=1 and the child's id and seed; native sends one request with n and the parent's.

In: a streamed choice becomes text pieces (one per token) and TokenLogprobs. These are pure
functions over texts already known (``tokens.TokenTexts``), so they need no server to test.
"""

from __future__ import annotations

from typing import Any

from playground.backends.base import Prepared
from playground.errors import RemoteError
from playground.run import TokenLogprob

# One top-logprob position: (sampled token id, its logprob, [(id, logprob), ...] best first).
Position = tuple[int, float, list[tuple[int, float]]]


def completion_requests(prepared: Prepared, model: str) -> list[tuple[int | None, dict[str, Any]]]:
    """(sample index, or None for native's one request of n, and its body) for each HTTP stream."""
    request = prepared.request
    if request.mode == "native":
        return [(None, completion_body(prepared, model, request.n, prepared.seeds[0], prepared.request_id))]
    return [(child.index, completion_body(prepared, model, 1, child.seed, child.request_id))
            for child in prepared.children]


def completion_body(prepared: Prepared, model: str, n: int, seed: int | None, request_id: str) -> dict[str, Any]:
    """Every sampler setting is sent explicitly, so the server's defaults (a model's
    generation_config, say) cannot change what the request means."""
    r = prepared.request
    extra: dict[str, Any] = {
        "top_k": r.top_k, "min_p": r.min_p, "repetition_penalty": r.repetition_penalty,
        "ignore_eos": r.ignore_eos, "return_token_ids": True, "request_id": request_id,
    }
    body: dict[str, Any] = {
        "model": model, "prompt": prepared.prompt_token_ids, "n": n, "seed": seed,
        "max_tokens": r.max_tokens, "temperature": r.temperature, "top_p": r.top_p,
        "presence_penalty": r.presence_penalty, "frequency_penalty": r.frequency_penalty,
        "stream": True, "stream_options": {"include_usage": True}, "extra_body": extra,
    }
    if r.stop:
        body["stop"] = list(r.stop)
    if r.logprobs is not None:
        body["logprobs"] = r.logprobs
        extra["return_tokens_as_token_ids"] = True  # alternatives keyed by id: exact, no clashes
    return body


def choice_token_ids(choice, where: str) -> list[int]:
    """The choice's token ids (vLLM's ``return_token_ids``), which the record is built on."""
    token_ids = getattr(choice, "token_ids", None)
    if token_ids is None:
        raise RemoteError(
            f"{where} did not return token ids; the playground needs a vLLM server that supports return_token_ids"
        )
    return list(token_ids)


def positions(logprobs, token_ids: list[int], where: str) -> list[Position]:
    """The completions API's logprobs of one choice, one position per token, alternatives best first."""
    if logprobs is None or len(logprobs.token_logprobs or []) != len(token_ids):
        raise RemoteError(f"{where} did not return logprobs for every token")
    result = []
    for token_id, chosen, top in zip(token_ids, logprobs.token_logprobs, logprobs.top_logprobs or []):
        entries = sorted(((parse_token_id(key), value) for key, value in (top or {}).items()), key=lambda e: -e[1])
        result.append((token_id, chosen, entries))
    return result


def ids_needing_text(token_ids: list[int], logprob_positions: list[Position] | None) -> set[int]:
    """The ids whose single-token text the conversions below will look up."""
    needed = set(token_ids) if len(token_ids) > 1 else set()
    for token_id, _, entries in logprob_positions or []:
        needed.add(token_id)
        needed.update(tid for tid, _ in entries)
    return needed


def pieces(text: str, token_ids: list[int], texts: dict[int, str]) -> list[str]:
    """One text piece per token. A chunk usually holds one token and its text is that token's
    piece as vLLM's detokenizer produced it. When the server merged several tokens into one
    chunk, the tokens decoded alone are used if they add up to the chunk's text; otherwise the
    whole text goes with the chunk's last token."""
    if len(token_ids) <= 1:
        return [text] * len(token_ids)
    alone = [texts[t] for t in token_ids]
    return alone if "".join(alone) == text else [""] * (len(token_ids) - 1) + [text]


def token_logprobs(logprob_positions: list[Position], k: int, texts: dict[int, str]) -> list[TokenLogprob]:
    """TokenLogprobs of one choice. The API gives no ranks: a sampled token's rank is exact when
    it is among the top k, and None when it is not (its rank is then above k)."""
    result = []
    for token_id, chosen, entries in logprob_positions:
        ids = [tid for tid, _ in entries]
        rank = ids.index(token_id) + 1 if 0 < len(entries) <= k and token_id in ids else None
        result.append(TokenLogprob(
            token_id=token_id, logprob=chosen, rank=rank, text=texts[token_id],
            top=[(tid, value, texts[tid]) for tid, value in entries],
        ))
    return result


def parse_token_id(key: str) -> int:
    """``token_id:123`` (return_tokens_as_token_ids) -> 123."""
    try:
        return int(key.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        raise RemoteError(f"the server returned a logprob key {key!r}, not token_id:N") from None
