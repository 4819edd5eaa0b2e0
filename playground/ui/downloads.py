"""Where downloads are written: a folder of the app's own, named by its process, gone with the app.

A download (an export, a sweep's files, a comparison, the QA matrix) is written to a folder of its
own here, and Gradio serves a copy it makes as the handler returns, kept in its cache (emptied by
age, ``ui/app.py``). So the app's own files are pruned after a few minutes, and the folder of an
app that was killed (kill -9 runs no exit handler) is removed at the next start.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

EXPORTS_PREFIX = "vllm-playground-exports-"
KEEP_S = 600.0  # a download's own file, once Gradio has its copy (made as the handler returns)


def export_folder() -> Path:
    """The app's export folder, named by its process, and gone with the app (atexit). Folders of
    this app's processes that are gone (a kill -9 leaves its downloads behind) are removed."""
    temp = Path(tempfile.gettempdir())
    for old in temp.glob(f"{EXPORTS_PREFIX}*-*"):
        pid = old.name.removeprefix(EXPORTS_PREFIX).split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{EXPORTS_PREFIX}{os.getpid()}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def download_path(export_dir: Path, name: str) -> Path:
    """Where one download is written: a folder of its own in the app's export folder, under the
    name the person downloads. Two sessions can show one run (a run link) and export it read their
    own way (the Set tab's extractor, a reference): each write has its own file, never another's.
    Older downloads are pruned first: an afternoon of reports (5 MB each) does not pile up twice."""
    prune(export_dir)
    return Path(tempfile.mkdtemp(dir=export_dir)) / name


def prune(export_dir: Path) -> None:
    """The download folders older than ``KEEP_S``: Gradio serves its own copies of them."""
    now = time.time()
    for old in export_dir.iterdir():
        with contextlib.suppress(OSError):
            if now - old.stat().st_mtime > KEEP_S:
                shutil.rmtree(old, ignore_errors=True)
