"""The engine factory: its defaults, explicit overrides, and a plain script that uses it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from playground.backends.engine import engine_args, platform_defaults

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import asyncio

    from vllm import SamplingParams

    from playground.backends.engine import create_engine


    async def main():
        engine = create_engine()
        try:
            async for output in engine.generate("The capital of France is",
                                                SamplingParams(max_tokens=5, seed=1), "script-0"):
                pass
            sample = output.outputs[0]
            print("TOKENS", len(sample.token_ids), "FINISHED", output.finished, "TEXT", repr(sample.text))
        finally:
            engine.shutdown()


    if __name__ == "__main__":
        asyncio.run(main())
""")


def test_explicit_arguments_override_the_platform_defaults(model_path):
    args = engine_args(model_path)
    for name, value in platform_defaults().items():
        assert getattr(args, name) == value
    assert args.disable_log_stats is False, "per-request metrics need stats logging"

    args = engine_args(model_path, max_model_len=512, enable_prefix_caching=False, disable_log_stats=True)
    assert (args.max_model_len, args.enable_prefix_caching, args.disable_log_stats) == (512, False, True)


def test_create_engine_works_from_a_plain_script_with_a_main_guard(model_path, tmp_path):
    """The README's promise for scripts: ``create_engine()`` with no arguments starts the default
    model, generates and shuts down. A fresh interpreter, so nothing from the test session helps."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=420,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("TOKENS"))
    assert line.startswith("TOKENS 5 FINISHED True TEXT "), line
