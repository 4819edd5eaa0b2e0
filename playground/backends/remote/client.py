"""URL and server-message plumbing for the remote backend.

vLLM serves the OpenAI API under /v1 but its own endpoints (/tokenize, /detokenize, /health,
/metrics, /version) at the server root, so one --base-url is split into both. And an HTTP or
OpenAI failure is turned into a sentence a person understands: the server's own message, not a
traceback, and the innermost cause rather than "Connection error.".
"""

from __future__ import annotations

import re

import httpx
import openai

from playground.errors import RemoteError


def split_base_url(url: str) -> tuple[str, str]:
    """``(api_base, server_root)``: the OpenAI API lives under /v1, vLLM's own endpoints
    (/tokenize, /health, /metrics, /version) at the root. Either form may be given."""
    url = url.strip().rstrip("/")
    if not re.match(r"^https?://", url):
        raise RemoteError(f"--base-url must start with http:// or https://, got {url!r}")
    if url.endswith("/v1"):
        return url, url[: -len("/v1")]
    return url + "/v1", url


def metric_total(text: str, name: str, **labels: str) -> float | None:
    """Sum a Prometheus metric over its series (one per engine), optionally filtered by labels."""
    total, seen = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        match = re.match(rf"^{re.escape(name)}(?:\{{(.*)\}})?\s+(\S+)$", line)
        if not match:
            continue
        series = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(1) or ""))
        if all(series.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
            seen = True
    return total if seen else None


def parse_token_id(key: str) -> int:
    """``token_id:123`` (return_tokens_as_token_ids) -> 123."""
    try:
        return int(key.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        raise RemoteError(f"the server returned a logprob key {key!r}, not token_id:N") from None


def server_message(response: httpx.Response) -> str:
    """vLLM answers errors as {"error": {"message": ...}}; anything else is shown as sent."""
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str) and error:  # vLLM's --api-key check answers {"error": "Unauthorized"}
        return error
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return str(data)[:500]


def openai_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    if isinstance(body, str) and body:
        return body
    return error.message


def connection_refused(error: BaseException) -> bool:
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ConnectionRefusedError) or "connection refused" in str(error).lower():
            return True
        if type(error).__name__ == "ConnectError" and "refused" in repr(error).lower():
            return True
        error = error.__cause__ or error.__context__
    return False


def innermost_cause(error: BaseException) -> str:
    """The innermost cause's message: 'peer closed connection...' says more than 'Connection error.'"""
    while (error.__cause__ or error.__context__) is not None:
        error = error.__cause__ or error.__context__
    return str(error) or type(error).__name__
