"""Shared fixtures. One real engine (the default model) for the whole session: it takes ~35 s on
the CPU to start and dominates test time."""

from __future__ import annotations

import os

import pytest

from tests.helpers import free_port
from tests.remote_server import EarlyStart, remote, remote_server  # noqa: F401  (session fixtures)

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

LONG_PROMPT = (
    "The lighthouse keeper wrote in his log every evening. He noted the wind, the colour of the "
    "sea, the ships that passed and the birds that rested on the rail. "
) * 8  # > 2 blocks of 128 tokens, so children can read the prompt from the prefix cache


@pytest.fixture(scope="session")
def model_path() -> str:
    from playground.backends.model import prepare

    return str(prepare())


# The KV cache is sized to the work (playground.backends.resources): n up to the app's default
# --max-n, and a test or two at once; up to three engines run side by side (this one, the
# LLMEngine, a vllm serve).
WORKLOAD = {"max_n": 256, "concurrency": 2}  # the app's default --max-n


@pytest.fixture(scope="session")
def backend(model_path):
    from playground.backends.embedded import EmbeddedBackend
    from playground.backends.resources import Workload

    with EmbeddedBackend.start(model_path, max_n=WORKLOAD["max_n"], workload=Workload(**WORKLOAD)) as backend:
        yield backend


@pytest.fixture(scope="session")
def host(backend):
    return backend.host


@pytest.fixture(scope="session")
def engine(host):
    return host.engine


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    """The session app's run store: a file of its own, never the user's data directory."""
    from playground.store import RunStore

    with RunStore(tmp_path_factory.mktemp("store") / "runs.sqlite3") as store:
        yield store


@pytest.fixture(scope="session")
def app_url(backend, store):
    """The real Gradio app, in this process, on the session's engine."""
    from playground.ui import build_app, launch_app

    demo = build_app(backend, store=store)
    _, url, _ = launch_app(demo, prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(),
                           quiet=True)
    yield url
    demo.close()


@pytest.fixture()
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)


@pytest.fixture(scope="session")
def sync_engine(model_path):
    """A V1 LLMEngine (the synchronous front end, add_request + step) for the session."""
    from playground.backends.engine import create_sync_engine, stop_sync_engine
    from playground.backends.resources import Workload

    engine = create_sync_engine(model_path, workload=Workload(**WORKLOAD))
    yield engine
    stop_sync_engine(engine)  # its engine core runs in a process of its own


def pytest_collection_modifyitems(items):
    """Tests marked `destructive` (they kill the session's engine core or vllm serve) run last; a
    `vllm serve` the selected tests need starts now."""
    items.sort(key=lambda item: item.get_closest_marker("destructive") is not None)
    EarlyStart.begin(items)


def pytest_sessionfinish():
    EarlyStart.close()


def pytest_configure(config):
    config.addinivalue_line("markers", "destructive: kills a shared engine or server; runs after every other test")
    config.addinivalue_line("markers", "slow: a long end-to-end run through a process or engine of its own, beside a "
                                       "faster test of the same thing; `make test-all` runs them, `make test` does not")
