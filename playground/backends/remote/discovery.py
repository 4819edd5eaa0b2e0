"""What a vLLM server serves, asked once when the backend connects.

The backend answers ``info()`` from this without asking the server again, so the page never
waits on the network to describe the engine. Discovery fails, with a sentence naming the
server, when the server cannot be used at all (nothing there, a wrong key, no such model).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from playground.backends.remote.client import Server
from playground.errors import RemoteError
from playground.sampling.request import Limits


@dataclass(frozen=True)
class ServedModel:
    """The model a backend drives on a server."""

    name: str  # the served model name: what requests put in "model"
    root: str  # the weights it was loaded from (Hugging Face id or folder)
    max_model_len: int
    vllm_version: str
    has_chat_template: bool  # the server can render a chat for it


async def discover(server: Server, http: httpx.AsyncClient, requested: str | None = None) -> ServedModel:
    """Ask the server what it serves, and pick ``requested`` (default: its base model)."""
    models = (await server.get(http, "/v1/models", "listing its models"))["data"]
    if not models:
        raise RemoteError(f"{server.where} serves no model")
    names = [m["id"] for m in models]
    if requested is None:
        card = models[0]  # the base model comes first; LoRA adapters follow it
    elif requested in names:
        card = models[names.index(requested)]
    else:
        raise RemoteError(f"{server.where} does not serve {requested!r}; it serves: {', '.join(names)}")
    version = (await server.get(http, "/version", "reading its version")).get("version", "unknown")
    return ServedModel(
        name=card["id"],
        root=card.get("root") or card["id"],
        max_model_len=card.get("max_model_len") or Limits().max_model_len,
        vllm_version=version,
        has_chat_template=await can_render_a_chat(server, http, card["id"]),
    )


async def can_render_a_chat(server: Server, http: httpx.AsyncClient, model: str) -> bool:
    """Whether the server renders a chat for ``model``: a /tokenize of one message succeeds.
    vLLM refuses it (HTTP 400) when the model has no chat template and none was given to it."""
    body = {"model": model, "messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": True}
    try:
        response = await http.post("/tokenize", json=body)
    except httpx.HTTPError as e:
        raise server.error(e, "checking whether it renders a chat template") from e
    if response.status_code in (401, 403):
        server.check(response, "checking whether it renders a chat template")
    return response.status_code == 200
