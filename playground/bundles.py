"""Reading saved runs: one bundle the page exported (indented JSON), or the JSONL that ``batch`` and
``sweep`` write (one bundle per line).

Beside the run record, below every front end, so the page's upload, ``analyze`` and the report
read files the same way. Each problem is a sentence that names its line: ``Run.from_dict`` says
what is wrong with a bundle (not one, damaged, from a newer playground), this module says where.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from playground.errors import InvalidBundle
from playground.run import Run

MAX_BYTES = 200 * 2**20  # a bundle of n=32 x 2000 tokens with every event is a few MB


@dataclass
class Located:
    """A run and where it was in its file: ``line`` is None for one indented bundle."""

    run: Run
    line: int | None


@dataclass
class BundleError:
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{'the file' if self.line is None else f'line {self.line}'}: {self.message}"


def parse_bundles(text: str) -> tuple[list[Located], list[BundleError]]:
    """Every bundle in ``text``, and a sentence per line that is not one (the others still count).

    The whole text as one JSON value is one bundle (the page's indented export, or a file of one
    line); otherwise each non-blank line is one (JSONL).
    """
    if not text.strip():
        return [], [BundleError(None, "the file is empty: a run bundle is a JSON object with \"request\" and "
                                      "\"samples\" (the page's export, or the output of batch or sweep)")]
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as e:
        if text.lstrip().startswith("{\n") or text.lstrip().startswith("{\r\n"):  # an indented bundle, broken
            return [], [BundleError(e.lineno, f"not valid JSON ({e.msg} at column {e.colno}): the file looks like "
                                              "one indented bundle, cut short or edited")]
    else:
        if "\n" in text.strip() or not isinstance(whole, dict):  # indented: one bundle, any layout
            return _one(whole, None)
        return _one(whole, 1 + text[:len(text) - len(text.lstrip())].count("\n"))  # one JSONL line, read once
    found, errors = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(BundleError(number, f"not valid JSON ({e.msg} at column {e.colno}), so not a run bundle"))
            continue
        more, wrong = _one(data, number)
        found += more
        errors += wrong
    return found, errors


def _one(data: object, line: int | None) -> tuple[list[Located], list[BundleError]]:
    try:
        return [Located(Run.from_dict(data), line)], []
    except InvalidBundle as e:
        return [], [BundleError(line, str(e))]


def read_bundles(path: str | Path) -> tuple[list[Located], list[BundleError]]:
    """``parse_bundles`` of a file; InvalidBundle when it cannot be read at all (missing, too big,
    not text)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InvalidBundle(f"{path.name} is {size / 2**20:.0f} MB, more than the {MAX_BYTES // 2**20} MB a "
                                "file of run bundles may have here")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidBundle(f"{path.name} is not text (bad UTF-8 at byte {e.start}), so not run bundles") from None
    except OSError as e:
        raise InvalidBundle(f"cannot read {path}: {e.strerror or e}") from None
    return parse_bundles(text)


def read_runs(path: str | Path) -> list[Run]:
    """Every run in the file, or InvalidBundle naming the first line that is not a bundle: all or
    nothing, for a caller (the page's upload) that must leave things as they were on a bad file."""
    found, errors = read_bundles(path)
    if errors:
        more = f" (and {len(errors) - 1} more line(s) like it)" if len(errors) > 1 else ""
        raise InvalidBundle(f"{Path(path).name}, {errors[0]}{more}")
    return [located.run for located in found]
