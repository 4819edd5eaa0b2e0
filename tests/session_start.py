"""The session's engines start in the background as soon as the tests are collected.

Each takes 25-60 s to start, most of it one core importing vLLM in a new process. Started one
after the other, in front of the first test that needed each, that was two and a half minutes of a
CI run with the machine's second core idle. So the tests that need no engine run first (conftest
orders them), while a thread starts the session's AsyncLLM and then its LLMEngine and `vllm serve`
boots in a process of its own; a fixture that needs one waits for it here. The thread starts its
engines one after the other: an engine's start sets the process's OpenMP variables while it lasts.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from tests.remote_server import Server, start_server

# The KV cache is sized to the work (playground.backends.resources): n up to the app's default
# --max-n, and a test or two at once; up to three engines run side by side (the AsyncLLM, the
# LLMEngine, a vllm serve).
WORKLOAD = {"max_n": 256, "concurrency": 2}  # the app's default --max-n
IN_THREAD = ("backend", "sync_engine")  # the order the thread starts them in
ENGINES = {*IN_THREAD, "remote_server", "engines_started"}  # what orders a test after the engine-free ones
START_TIMEOUT = 900  # s: each start is 25-60 s on an idle 2-core machine, much more when it is shared


def needs_engine(item) -> bool:
    return not ENGINES.isdisjoint(item.fixturenames)


class SessionStart:
    """What the collected tests need, started at once; ``get`` waits for one, ``close`` ends all."""

    def __init__(self):
        self.model: str | None = None
        self.server: Server | None = None
        self._made: dict[str, Any] = {}
        self._errors: dict[str, BaseException] = {}
        self._ready = {name: threading.Event() for name in IN_THREAD}
        self._thread: threading.Thread | None = None
        self._imported = threading.Event()  # the thread has imported vLLM (and transformers through it)
        self._wanted: set[str] = set()  # what the thread starts
        self._stack = contextlib.ExitStack()

    def begin(self, items: list) -> None:
        needed = set().union(*(i.fixturenames for i in items)) & ENGINES
        if not needed:
            return
        from playground.backends.model import prepare

        self.model = str(prepare())  # here, before any test changes where the model is looked for
        if "remote_server" in needed and not os.environ.get("PLAYGROUND_REMOTE_URL"):
            self.server = start_server(self.model, Path(tempfile.mkdtemp(prefix="vllm-serve-")) / "server.log")
        wanted = [name for name in IN_THREAD if name in needed]
        self._wanted.update(wanted)
        if wanted:
            self._thread = threading.Thread(target=self._start, args=(wanted,), name="session-engines", daemon=True)
            self._thread.start()

    def _start(self, wanted: list[str]) -> None:
        with contextlib.suppress(Exception):  # a failed import fails the start below, which says so
            from transformers import AutoConfig, AutoTokenizer  # noqa: F401  (the names the tests import)

            import playground.backends.embedded  # noqa: F401  (vLLM, and transformers through it)
        self._imported.set()
        for name in wanted:
            try:
                self._made[name] = getattr(self, f"_make_{name}")()
            except BaseException as e:  # re-raised in the test that needs it
                self._errors[name] = e
            finally:
                self._ready[name].set()

    def _make_backend(self):
        from playground.backends.embedded import EmbeddedBackend
        from playground.backends.resources import Workload

        return self._stack.enter_context(
            EmbeddedBackend.start(self.model, max_n=WORKLOAD["max_n"], workload=Workload(**WORKLOAD)))

    def _make_sync_engine(self):
        from playground.backends.engine import create_sync_engine, stop_sync_engine
        from playground.backends.resources import Workload

        engine = create_sync_engine(self.model, workload=Workload(**WORKLOAD))
        self._stack.callback(stop_sync_engine, engine)  # its engine core runs in a process of its own
        return engine

    def get(self, name: str, model: str):
        """The engine ``name`` of the session; started here if collection did not foresee it (once
        the thread is done: never two starts at once)."""
        if name not in self._wanted:
            self.join()
            self.model, self._wanted = self.model or model, self._wanted | {name}
            self._start([name])
        if not self._ready[name].wait(START_TIMEOUT):
            raise TimeoutError(f"the session's {name} did not start within {START_TIMEOUT} s")
        if name in self._errors:
            raise self._errors[name]
        return self._made[name]

    def imports(self) -> None:
        """Wait until the thread has imported vLLM. transformers resolves its names lazily, and two
        threads resolving them at once get a half-made module ("cannot import name
        'PreTrainedConfig'" in the thread, 'AutoTokenizer' in the test): a test that imports from
        transformers while the engines start calls this first."""
        if self._thread is not None:
            self._imported.wait(START_TIMEOUT)

    def join(self) -> None:
        """Wait until the thread has started what it starts."""
        if self._thread is not None:
            self._thread.join(START_TIMEOUT)

    def close(self) -> None:
        self.join()
        self._stack.close()
        if self.server is not None:
            self.server.stop()


STARTING = SessionStart()
