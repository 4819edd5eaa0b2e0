"""The house rules that keep the code readable: imports flow one way (import-linter's contracts in
pyproject.toml, checked by its real command), no module grows past 500 lines (a whole idea fits;
beyond, it is two), and ruff's checks (pyproject.toml) pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500


def test_imports_keep_the_layers_of_pyproject_toml():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "playground").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these modules: {long}"


def test_ruff_check_passes():
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run([str(ruff), "check", "app.py", "playground", "tests", "scripts"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
