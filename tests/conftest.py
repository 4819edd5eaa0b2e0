"""Shared fixtures. One real engine (the default model) for the whole session: it takes ~35 s on
the CPU to start and dominates test time."""

from __future__ import annotations

import os

import pytest

# Small KV cache: a 135 M model needs little, and tests may run several engines side by side.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

LONG_PROMPT = (
    "The lighthouse keeper wrote in his log every evening. He noted the wind, the colour of the "
    "sea, the ships that passed and the birds that rested on the rail. "
) * 8  # > 2 blocks of 128 tokens, so children can read the prompt from the prefix cache


@pytest.fixture(scope="session")
def model_path() -> str:
    from playground.model import prepare

    return str(prepare())


@pytest.fixture(scope="session")
def host(model_path):
    from playground.engine import EngineHost

    host = EngineHost.start(model_path)
    yield host
    host.shutdown()


@pytest.fixture(scope="session")
def engine(host):
    return host.engine
