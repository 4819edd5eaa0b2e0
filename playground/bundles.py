"""Reading saved runs: one bundle the page exported (indented JSON), or the JSONL that ``batch`` and
``sweep`` write (one bundle per line).

Beside the run record, below every front end, so the page's upload, ``analyze`` and the report
read files the same way. Each problem is a sentence that names its line: ``Run.from_dict`` says
what is wrong with a bundle (not one, damaged, from a newer playground), this module says where.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.errors import TOO_DEEP, TOO_LONG, InvalidBundle, InvalidRequest, damaged_bundle, json_problem
from playground.request import MAX_SEED, check_record
from playground.run import Run


@dataclass(frozen=True)
class ReadLimits:
    """How much a reader will take from one file, so a file cannot exhaust the memory of the
    process that reads it (the page's upload is read by the server). Each is refused with a
    sentence, before anything of the file is used."""

    max_bytes: int = 200 * 2**20
    max_bundles: int = 10_000
    max_samples: int = 1024  # in one run: the largest --max-n

    def check_text(self, text: str, name: str = "the file") -> None:
        bundles = sum(1 for line in text.splitlines() if line.strip()) if not text.lstrip().startswith("{\n") else 1
        if bundles > self.max_bundles:
            raise InvalidBundle(f"{name} holds {bundles:,} lines of bundles, more than the {self.max_bundles:,} "
                                "this reader takes from one file: split it")


DEFAULT_LIMITS = ReadLimits()
PAGE_MAX_MB = 50  # the page's default for an upload, which its server reads whole (--max-file-mb)


def place(line: int | None, item: int | None, cell: str | None = None, file: str | None = None) -> str:
    """Where a run was in its file, in words: "line 3", "the file", "line 3, run 2", "the file,
    cell DELTA × async" (a QA matrix's); with ``file`` (a run of several files), its name first:
    "b.jsonl line 3", "a.json"."""
    if line is None:
        where = file or "the file"
    else:
        where = f"{file} line {line}" if file else f"line {line}"
    if cell is not None:
        return f"{where}, cell {cell}"
    return where if item is None else f"{where}, run {item}"


@dataclass
class Located:
    """A run and where it was in its file: ``line`` is None for one indented bundle; ``item``, its
    place (from 1) in a JSON array of runs, else None; ``cell``, its cell's label in a QA matrix."""

    run: Run
    line: int | None
    item: int | None = None
    cell: str | None = None
    file: str | None = None  # its file's name, when a caller reads several

    @property
    def where(self) -> str:
        return place(self.line, self.item, self.cell, self.file)


@dataclass
class BundleError:
    line: int | None
    message: str
    item: int | None = None
    cell: str | None = None
    file: str | None = None  # its file's name, when a caller reads several

    @property
    def where(self) -> str:
        return place(self.line, self.item, self.cell, self.file)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def _cut(line: str, most: int = 80) -> str:
    return line if len(line) <= most else line[:most] + "…"


def csv_header(text: str) -> str | None:
    """The first line of a text that starts as a table of comma-separated values does (a header of
    column names), or None: every reader names such a file alike, not line by line as bad JSON."""
    first = text.lstrip().split("\n", 1)[0].strip()
    return first if re.fullmatch(r"\w+(,\w+)+", first) else None


DEEP = f"{TOO_DEEP}, so it is not one"


def parse_bundles(text: str, limits: ReadLimits = DEFAULT_LIMITS,
                  name: str = "the file") -> tuple[list[Located], list[BundleError]]:
    """Every bundle in ``text``, and a sentence per line that is not one (the others still count).

    The whole text as one JSON value is one bundle (the page's indented export, or a file of one
    line); otherwise each non-blank line is one (JSONL). A JSON array of runs, whole or on a line,
    is each of them. InvalidBundle for a text over ``limits``.
    """
    limits.check_text(text, name)
    if not text.strip():
        return [], [BundleError(None, "the file is empty: a run bundle is a JSON object with \"request\" and "
                                      "\"samples\" (the page's export, or the output of batch or sweep)")]
    if text.lstrip().startswith("<"):  # a report (analyze --html, the Export tab's), or any web page
        return [], [BundleError(None, "this is an HTML page (a report?), not run bundles: open it in a browser; the "
                                      "runs are the page's JSON export, or the JSONL of batch or sweep")]
    if header := csv_header(text):
        return [], [BundleError(None, f"this is a table of comma-separated values (its columns: {_cut(header)}), "
                                      "not run bundles: the Export tab's tokens CSV is read with pandas or a "
                                      "spreadsheet; the runs are the page's JSON export, or the JSONL of batch or "
                                      "sweep")]
    try:
        whole = json.loads(text)
    except RecursionError:
        return [], [BundleError(None, DEEP)]
    except json.JSONDecodeError as e:
        if text.lstrip().startswith("{\n") or text.lstrip().startswith("{\r\n"):  # an indented bundle, broken
            return [], [BundleError(e.lineno, f"not valid JSON ({json_problem(e)}): the file looks like "
                                              "one indented bundle, cut short or edited")]
    except ValueError:
        return [], [BundleError(None, f"{TOO_LONG}, so it is not one")]
    else:
        if "\n" in text.strip() or not isinstance(whole, dict):  # indented: one bundle, any layout
            return _one(whole, None, limits)
        return _one(whole, 1 + text[:len(text) - len(text.lstrip())].count("\n"), limits)  # one JSONL line
    found, errors = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except RecursionError:
            errors.append(BundleError(number, DEEP))
            continue
        except json.JSONDecodeError as e:
            errors.append(BundleError(number, f"not valid JSON ({json_problem(e)}), so not a run bundle"))
            continue
        except ValueError:
            errors.append(BundleError(number, f"{TOO_LONG}, so it is not one"))
            continue
        more, wrong = _one(data, number, limits)
        found += more
        errors += wrong
    return found, errors


def _one(data: object, line: int | None, limits: ReadLimits,
         item: int | None = None) -> tuple[list[Located], list[BundleError]]:
    if item is None and _matrix(data):  # qa --json: every cell's run, by its cell's label
        return _cells(data, line, limits)
    if item is None and _runs(data):  # a JSON array of runs, as a script might write them all at once
        if len(data) > limits.max_bundles:
            return [], [BundleError(line, f"an array of {len(data):,} runs, more than the {limits.max_bundles:,} "
                                          "this reader takes from one file: split it")]
        found, errors = [], []
        for k, each in enumerate(data, 1):
            more, wrong = _one(each, line, limits, k)
            found += more
            errors += wrong
        return found, errors
    if _samples_only(data):
        data = {"samples": data}  # one run's samples, written by hand
    samples = data.get("samples") if isinstance(data, dict) else None
    if isinstance(samples, list) and len(samples) > limits.max_samples:
        return [], [BundleError(line, f"a run of {len(samples):,} samples, more than the {limits.max_samples:,} "
                                      "this reader takes in one run", item)]
    try:
        if isinstance(samples, list) and "bundle_version" not in data:
            data = hand_made(data)
        run = Run.from_dict(data)
        check_record(run.request)  # each setting of its type: a page puts them in its form, Run sends them
        check_samples(run)
        return [Located(run, line, item)], []
    except InvalidBundle as e:
        return [], [BundleError(line, str(e), item)]
    except InvalidRequest as e:
        return [], [BundleError(line, str(damaged_bundle(f"its request's {e}")), item)]


def _matrix(data: object) -> bool:
    """``data`` is a QA matrix (``qa --json``, the QA tab's export): cells, each with its run."""
    return isinstance(data, dict) and "matrix_version" in data and isinstance(data.get("cells"), list)


def _cells(matrix: dict, line: int | None, limits: ReadLimits) -> tuple[list[Located], list[BundleError]]:
    """A matrix's runs, each named by its cell ("DELTA × async"); a cell that failed before it made
    a run is said, not read as a damaged bundle."""
    found, errors = [], []
    for k, cell in enumerate(matrix["cells"], 1):
        label = (f"{cell.get('output_kind')} × {cell.get('path')}" if isinstance(cell, dict) else str(k))
        run = cell.get("run") if isinstance(cell, dict) else None
        if run is None:
            reason = cell.get("error") if isinstance(cell, dict) else None
            errors.append(BundleError(line, f"no run ({reason or 'none was recorded'})", k, label))
            continue
        more, wrong = _one(run, line, limits, k)
        found += [dataclasses.replace(each, cell=label) for each in more]
        errors += [dataclasses.replace(each, cell=label) for each in wrong]
    return found, errors


def _samples_only(data: object) -> bool:
    """``data`` is one run's samples written by hand: a list of texts, or of ``{"text": ...}``
    objects that are not runs."""
    return (isinstance(data, list) and bool(data)
            and all(isinstance(s, str) or isinstance(s, dict) and isinstance(s.get("text"), str)
                    and "samples" not in s for s in data))


def _runs(data: object) -> bool:
    """``data`` is an array of runs (bundles, or runs written by hand), not one run's samples."""
    return (isinstance(data, list) and bool(data)
            and all(isinstance(each, dict) and "samples" in each or _samples_only(each) for each in data))


def check_samples(run: Run) -> None:
    """Each sample's seed a whole number in vLLM's range (or none), its token ids whole numbers of
    a vocabulary, its finish reason text (or none): every view reads them as such, and a page
    shows them."""
    def whole(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED

    for s in run.samples:
        if s.seed is not None and not whole(s.seed):
            raise damaged_bundle(f"sample {s.index}'s seed must be a whole number from 0 to 2**63-1, got {s.seed!r}")
        if not all(whole(t) for t in s.token_ids):
            wrong = next(t for t in s.token_ids if not whole(t))
            raise damaged_bundle(f"sample {s.index}'s token ids must be whole numbers from 0, got {wrong!r}")
        if s.finish_reason is not None and not isinstance(s.finish_reason, str):
            raise damaged_bundle(f"sample {s.index}'s finish_reason must be text, got {s.finish_reason!r}")
        try:  # a JSON escape may write a lone surrogate, which no page, file or terminal can show
            (s.text or "").encode("utf-8")
            "".join(t for t in s.token_texts if isinstance(t, str)).encode("utf-8")
        except UnicodeEncodeError as e:
            raise damaged_bundle(f"sample {s.index}'s text is not valid UTF-8 (a lone surrogate, "
                                 f"{e.object[e.start]!r})") from None


def hand_made(data: dict[str, Any]) -> dict[str, Any]:
    """A run written by hand, or by a script that knows only what its samples said, completed
    to a bundle of version 1: ``["text", ...]``, ``{"samples": ["text", ...]}`` or
    ``{"prompt": ..., "samples": [{"text": ...}, ...]}``, every other field optional, the request's
    settings in ``request`` or beside ``samples``. So that a set of texts from anywhere (another
    engine, a paper, a test) can be analysed and drawn as a graph. A sample's ``index`` is its
    place in the list, its ``seed`` the request's seed plus that place (or none), its tokens
    unknown; the run finished. A real bundle of version 1 has all of these and is kept as it is.
    """
    request = data.get("request", {})
    if not isinstance(request, dict):
        raise damaged_bundle("its request is not an object")
    # Beside the samples, whatever is no part of a run's record belongs to its request: the
    # settings, and what else a script knows of it (its right answer, "reference"; an id).
    beside = {name: value for name, value in data.items() if name not in RUN_FIELDS}
    request = {**beside, **request}
    data = {name: value for name, value in data.items() if name in RUN_FIELDS}
    base = request.get("seed")
    samples, words = [], {}
    for k, s in enumerate(data["samples"]):
        if isinstance(s, str):
            s = {"text": s}
        if not isinstance(s, dict) or not isinstance(s.get("text"), str):
            what = "has no text" if isinstance(s, dict) and "text" not in s else "is neither a text nor an object"
            raise damaged_bundle(f"sample {k} {what}: a sample written by hand needs at least its \"text\"")
        if s.get("index", k) != k:
            raise damaged_bundle(f"sample {k} has the index {s['index']!r}: a run lists its samples "
                                 "in the order of their indices, 0 to n-1")
        seed = base + k if isinstance(base, int) and not isinstance(base, bool) else None
        sample = {"index": k, "seed": seed, **s}
        if "token_ids" not in s:
            if "token_texts" in s:
                raise damaged_bundle(f"sample {k} has token texts and no token ids: give both, or neither")
            sample["token_texts"] = word_pieces(s["text"])
            sample["token_ids"] = [words.setdefault(piece, len(words)) for piece in sample["token_texts"]]
        samples.append(sample)
    engine = data.get("engine") or ({"model": "written by hand", "tokens": WORDS} if words else {})
    if not request.get("request_id"):  # the same run, the same id: History and Compare tell runs apart by it
        written = json.dumps([request, [s["text"] for s in samples]], sort_keys=True).encode()
        request["request_id"] = f"hand-{hashlib.sha256(written).hexdigest()[:12]}"
    return {**data, "request": request, "status": data.get("status", "finished"), "engine": engine,
            "samples": samples}


RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(Run)) | {"bundle_version"}
WORDS = "words"  # a hand-made run's engine["tokens"]: its words stand in for the tokens it does not give


def word_pieces(text: str) -> list[str]:
    """``text`` as words, each with the whitespace before it (the last with what follows it too),
    so that the pieces join to the text, as a tokenizer's pieces do: the tokens of a sample written
    by hand, so that every view that reads tokens (diff, tree, wall, diversity) reads its words."""
    pieces = re.findall(r"\s*\S+", text)
    rest = text[sum(map(len, pieces)):]
    if rest:
        pieces = [*pieces[:-1], pieces[-1] + rest] if pieces else [rest]
    return pieces


def read_bundles(path: str | Path, limits: ReadLimits = DEFAULT_LIMITS) -> tuple[list[Located], list[BundleError]]:
    """``parse_bundles`` of a file; InvalidBundle when it cannot be read at all (missing, over
    ``limits``, not text)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limits.max_bytes:
            raise InvalidBundle(f"{path.name} is {size / 2**20:.1f} MB, more than the {limits.max_bytes / 2**20:g} MB "
                                "a file of run bundles may have here")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidBundle(f"{path.name} is not text (bad UTF-8 at byte {e.start}), so not run bundles") from None
    except OSError as e:
        raise InvalidBundle(f"cannot read {path}: {e.strerror or e}") from None
    return parse_bundles(text, limits, path.name)


def read_runs(path: str | Path, limits: ReadLimits = DEFAULT_LIMITS) -> list[Run]:
    """Every run in the file, or InvalidBundle naming the first line that is not a bundle: all or
    nothing, for a caller (the page's upload) that must leave things as they were on a bad file."""
    found, errors = read_bundles(path, limits)
    if errors:
        more = f" (and {len(errors) - 1} more line(s) that are not bundles either)" if len(errors) > 1 else ""
        first, name = errors[0], Path(path).name  # "runs.jsonl, line 3: …", "run.json: …" (never "the file" too)
        where = first.where.replace("the file", name, 1) if first.line is None else f"{name}, {first.where}"
        raise InvalidBundle(f"{where}: {first.message}{more}")
    return [located.run for located in found]
