"""The real command line, as a newcomer runs it (subprocesses of .venv's python)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def app(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "app.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_help_lists_vllm_engine_flags_and_the_playgrounds_own():
    result = app("--help")
    assert result.returncode == 0
    for flag in ("--enforce-eager", "--max-model-len", "--max-n", "--host", "--port", "--auth", "--backend"):
        assert flag in result.stdout, flag


def test_bad_values_give_a_clear_error():
    result = app("--max-n", "0")
    assert result.returncode == 2
    assert "--max-n must be between 1 and 256, got 0" in result.stderr
    result = app("--port", "http")
    assert result.returncode == 2 and "--port must be a whole number" in result.stderr
    result = app("--auth", "nocolon")
    assert result.returncode != 0 and "--auth must look like user:password" in result.stderr


def test_an_exposed_host_without_auth_warns_and_an_unreachable_server_is_named():
    result = app("--host", "0.0.0.0", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1")
    assert "WARNING: binding to 0.0.0.0 without --auth" in result.stderr
    assert result.returncode == 2 and "127.0.0.1:9" in result.stderr


def test_explicit_engine_flags_are_told_apart_from_defaults():
    from playground.cli import PlaygroundParser

    parser = PlaygroundParser("app", "test", lambda group: None)
    args, given = parser.parse(["--max-model-len", "1024", "--no-enable-prefix-caching"])
    assert given == {"max_model_len": 1024, "enable_prefix_caching": False}
    assert args.model is None and args.enforce_eager is not True
