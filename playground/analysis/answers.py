"""Which answer the n samples give, and how much they agree on it.

An **extractor** turns a sample's text into its answer, or None when it finds none. The samples
are grouped by answer; an answer with more votes than every other is the **majority answer**, and
the share of all n samples the most common answer has is the **vote share**: self-consistency
(Wang et al. 2023, "Self-Consistency Improves Chain of Thought Reasoning in Language Models", ICLR)
samples several reasoning paths and takes the most frequent final answer, and the vote share is
how sure that vote is.

One rule for every view: when no answer has more votes than every other (a tie at the top, all
answers distinct among them), there is **no majority**, as maj@k counts it (convergence.py); a
view then says why in words (``majority_text``: "no majority: all 8 answers differ", "no
majority: 2 answers tie with 3 votes each"), never an answer with a tie marker glued to it. The
vote share stays a number in a tie, the share each of the tied answers has: how far the samples
agree, though no answer won (charts of it against a setting need a number; 1/n says no two
samples agree). The **answer entropy**
-sum(p·log2 p) over the answer groups (p: a group's share of the samples that gave an answer) is
the discrete form of the sample-based uncertainty of Kuhn et al. 2023 ("Semantic Uncertainty:
Linguistic Invariances for Uncertainty Estimation in Natural Language Generation", ICLR), with
equal answers standing in for equal meanings: 0 bits when every sample agrees, log2(n) when no
two do.

Extractors, chosen by name (``parse_extractor``):

- ``normalized``: the whole text, case-folded, punctuation removed, whitespace collapsed;
- ``first-line``: the first line that is not blank, stripped;
- ``last-number``: the last number in the text ("1,234.50" -> "1234.5", "-3" -> "-3");
- ``boxed``: the content of the last ``\\boxed{...}`` (braces may nest), as in MATH-style answers;
- ``regex:PATTERN``: the first match's one group (the pattern must have exactly one group).

A pattern is typed by a person (in the page, by any visitor), so it is matched with the ``regex``
package rather than ``re``: it resolves many patterns that backtrack catastrophically in ``re``
(``((?:a|a)*)x``), it releases the GIL while it matches, so other sessions keep being served, and
it takes a timeout: all of a run's samples share ``PATTERN_SECONDS``, and a pattern that needs more
ends with a sentence naming it and the sample it was reading.
"""

from __future__ import annotations

import math
import re
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import regex

from playground.analysis.display import continued_text, truncate
from playground.errors import PlaygroundError
from playground.run import Run, Sample
from playground.text import fold

EXTRACTORS = ("normalized", "first-line", "last-number", "boxed", "regex")
DEFAULT_EXTRACTOR = "normalized"  # defined for every text: a person who did not choose sees literal agreement
PATTERN_SECONDS = 2.0  # what a typed pattern may spend on all of one run's samples

_ARABIC_SEPARATORS = str.maketrans({"\u066b": ".", "\u066c": ","})  # Arabic decimal and thousands separators
_NUMBER = re.compile(r"(?:(?<![\w.])-)?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\d.])\.\d+)")  # "2-3": 3


class InvalidExtractor(PlaygroundError, ValueError):
    """An extractor name that does not exist, or a pattern that does not compile, lacks its group,
    or takes too long."""


class PatternTimeout(InvalidExtractor):
    """A pattern that did not finish matching within its time."""


@dataclass(frozen=True)
class Extractor:
    """A named text -> answer function; ``spec`` is what a person types (``regex:\\d+ (\\w+)``).
    ``extract(text, deadline)``: ``deadline`` (time.monotonic()) bounds a pattern's matching."""

    spec: str
    extract: Callable[..., str | None]

    def __call__(self, text: str, deadline: float | None = None) -> str | None:
        if self.spec.startswith("regex:"):
            answer = self.extract(text or "", deadline)
        else:
            answer = self.extract(text or "")
        return answer if answer else None  # an empty answer is no answer


def normalized(text: str) -> str:
    """Folded (``text.fold``: any case, compatibility forms), punctuation (Unicode category P*)
    dropped, whitespace collapsed."""
    kept = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in fold(text))
    return " ".join(kept.split())


def first_line(text: str) -> str | None:
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


def last_number(text: str) -> str | None:
    """The last number, written plainly: in ASCII digits whatever digits it was written in
    ("٣٫٥", "７" and "7" are numbers of one kind), thousands separators dropped, trailing decimal
    zeros dropped, so "1,000.0" and "1000" are the same answer."""
    found = _NUMBER.findall(fold(text).translate(_ARABIC_SEPARATORS))  # full-width digits folded too
    if not found:
        return None
    number = "".join(str(unicodedata.decimal(ch, ch)) for ch in found[-1]).replace(",", "")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    number = re.sub(r"^(-?)\.", r"\g<1>0.", number)  # ".5" -> "0.5"
    return "0" if number in ("-0", "-", "") else number


def boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` whose braces close; nested braces are kept whole."""
    for start in reversed([m.end() for m in re.finditer(r"\\boxed\s*\{", text)]):
        depth = 1
        for pos in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[pos], 0)
            if depth == 0:
                return text[start:pos].strip()
    return None


def regex_extractor(pattern: str) -> Callable[..., str | None]:
    """The first match's group; InvalidExtractor names the pattern if it cannot serve. Matching
    past ``deadline`` (default: ``PATTERN_SECONDS`` from now) raises PatternTimeout."""
    if not pattern:
        raise InvalidExtractor("the pattern is empty: type one with one group around the answer, e.g. "
                               "'answer is (\\w+)'")
    try:
        compiled = regex.compile(pattern)
    except (regex.error, re.error) as e:
        raise InvalidExtractor(f"the pattern '{pattern}' does not compile: {e}") from None
    if compiled.groups != 1:
        raise InvalidExtractor(f"the pattern '{pattern}' has {compiled.groups} groups; it needs exactly one, "
                               "around the answer, e.g. 'answer is (\\w+)'")

    def extract(text: str, deadline: float | None = None) -> str | None:
        left = (deadline - time.monotonic()) if deadline is not None else PATTERN_SECONDS
        try:
            match = compiled.search(text, timeout=max(left, 0.001), concurrent=True)
        except TimeoutError:
            raise PatternTimeout(f"the pattern '{pattern}' took more than {PATTERN_SECONDS:g} s") from None
        return match.group(1).strip() if match and match.group(1) is not None else None

    return extract


_BY_NAME = {"normalized": normalized, "first-line": first_line, "last-number": last_number, "boxed": boxed}


def whole_text_reference(reference: str) -> str:
    """What a right answer given with no way of reading answers is compared with: the whole text,
    which rarely matches ("391" against "17 * 23 = 391"), so a pass@k of 0 is not taken at its word.
    The command line's note and the Sweep tab's say it alike, each naming its own controls."""
    return f"the reference {reference!r} is compared with each sample's whole text ({DEFAULT_EXTRACTOR})"


def parse_extractor(spec: str | None) -> Extractor:
    """The extractor a person named: one of EXTRACTORS, with ``regex:PATTERN`` for the regex."""
    spec = DEFAULT_EXTRACTOR if spec is None or not str(spec).strip() else str(spec).strip()
    if spec.startswith("regex:"):
        return Extractor(spec, regex_extractor(spec[len("regex:"):]))
    if spec == "regex":
        raise InvalidExtractor("the regex extractor needs a pattern with one group: regex:PATTERN")
    if spec not in _BY_NAME:
        raise InvalidExtractor(f"unknown answer extractor {spec!r}: use one of "
                               f"{', '.join(n for n in EXTRACTORS if n != 'regex')} or regex:PATTERN")
    return Extractor(spec, _BY_NAME[spec])


def entropy_bits(counts: Iterable[int]) -> float | None:
    """Shannon entropy in bits of the distribution the counts make; None when they sum to 0."""
    counts = [c for c in counts if c > 0]
    total = sum(counts)
    if total == 0:
        return None
    return max(0.0, -sum(c / total * math.log2(c / total) for c in counts))


def majority_text(answer: str | None, votes: int, tied_answers: int, chars: int | None = None) -> str:
    """The majority in a table cell or a sentence: ``answer`` (cut to ``chars``) when it is the
    only answer with ``votes`` votes, else why there is no majority, whole: "no majority: all 8
    answers differ" (``votes`` 1), "no majority: 2 answers tie with 3 votes each", "no majority: no
    sample gave an answer" (no ``answer``). ``tied_answers``: how many answers have ``votes`` votes
    (1 with a majority)."""
    if tied_answers >= 2:
        if votes == 1:  # every answer once: all of them differ
            return f"no majority: {'the 2' if tied_answers == 2 else f'all {tied_answers}'} answers differ"
        return f"no majority: {tied_answers} answers tie with {votes} votes each"
    if answer is None:
        return "no majority: no sample gave an answer"
    return truncate(answer, chars) if chars is not None else answer


def read_answers(texts: list[str], extractor: Extractor) -> list[str | None]:
    """Each text's answer, in order. A pattern's time is shared by all the texts
    (``PATTERN_SECONDS``), so a run of many samples ends as soon as a single one would; running
    out of it raises PatternTimeout naming the pattern and the sample."""
    deadline = time.monotonic() + PATTERN_SECONDS
    answers = []
    for index, text in enumerate(texts):
        try:
            answers.append(extractor(text, deadline))
        except PatternTimeout as e:
            raise PatternTimeout(f"{e} on the samples' texts (stopped at sample {index}, of {len(text)} "
                                 "characters): it backtracks too much; simplify it, e.g. with fewer nested "
                                 "repetitions") from None
    return answers


@dataclass
class AnswerGroup:
    answer: str
    indices: list[int]  # sample indices, ascending
    seeds: list[int | None]
    example: str  # the text of the group's first sample

    @property
    def size(self) -> int:
        return len(self.indices)


@dataclass
class Answers:
    """The samples grouped by answer: groups largest first (ties: the earliest sample first)."""

    extractor: str
    n: int
    answers: dict[int, str | None]  # sample index -> answer (None: could not be extracted)
    groups: list[AnswerGroup]
    unanswered: list[int]  # sample indices whose answer could not be extracted
    unanswered_seeds: list[int | None] = field(default_factory=list)  # their seeds, in ``unanswered`` order

    @property
    def answered(self) -> int:
        return self.n - len(self.unanswered)

    @property
    def majority(self) -> AnswerGroup | None:
        """The first of the most common answers (a tie: the earliest sample's): not necessarily a
        majority. Whether it is one: ``winner``; what to show: ``majority_text``."""
        return self.groups[0] if self.groups else None

    @property
    def top_votes(self) -> int:
        """The votes of the most common answer (in a tie, of each tied answer); 0 without answers."""
        return self.groups[0].size if self.groups else 0

    @property
    def leaders(self) -> list[AnswerGroup]:
        """The groups with ``top_votes`` votes, in ``groups`` order: one when there is a majority,
        two or more in a tie, none without answers."""
        return [g for g in self.groups if g.size == self.top_votes]

    @property
    def winner(self) -> AnswerGroup | None:
        """The majority answer's group: the answer with more votes than every other; None in a tie
        at the top (all answers distinct is one) and without answers."""
        leaders = self.leaders
        return leaders[0] if len(leaders) == 1 else None

    @property
    def vote_share(self) -> float | None:
        """``top_votes`` as a share of all n samples (unanswered ones count against it); None without
        answers. With a majority, the majority's share; in a tie, the share each tied answer has
        (1/n: no two samples agree), a number still, though no answer won: see ``winner``."""
        return self.top_votes / self.n if self.groups else None

    @property
    def tied(self) -> bool:
        """Two or more answers share the most votes: there is no majority."""
        return len(self.leaders) > 1

    def majority_text(self, chars: int | None = None) -> str:
        """The majority as a person reads it: the answer (cut to ``chars``), or why there is none
        (never cut); see the module-level ``majority_text``."""
        winner = self.winner
        return majority_text(winner.answer if winner else None, self.top_votes, len(self.leaders), chars)

    @property
    def entropy(self) -> float | None:
        """Bits, over the samples that gave an answer; None when none did."""
        return entropy_bits(g.size for g in self.groups)

    def group_of(self, index: int) -> int | None:
        """The position in ``groups`` of sample ``index``'s group (None: no answer)."""
        return next((k for k, g in enumerate(self.groups) if index in g.indices), None)


def cut_short(sample: Sample) -> bool:
    """A sample stopped before it finished (Stop, a failure): its tokens are a beginning."""
    return sample.finish_reason in (None, "abort")


def cut_short_note(run: Run) -> str:
    """For a run that was stopped (or failed) with samples unfinished, the sentence that says so:
    their answers, and what is counted of them, are read from what they had said by then ("" for
    a run whose samples all finished, and for one still streaming)."""
    if run.status not in ("aborted", "error"):
        return ""
    cut = [s for s in run.samples if cut_short(s)]
    if not cut:
        return ""
    were = "was" if len(cut) == 1 else "were"
    return (f"{len(cut)} of the {run.n} samples {were} stopped before they finished: their answers, and every "
            "figure that counts them, read what they had said by then.")


def answer_texts(run: Run) -> list[str]:
    """What each sample says, as an answer is read from it: a branch's samples behind the text they
    continue (``continued_text``), for "Orange" cut at "O" is "range" alone."""
    lead = continued_text(run)
    return [lead + s.text for s in run.samples]


def group_answers(run: Run, extractor: Extractor | str | None = None) -> Answers:
    """Extract every sample's answer (from ``answer_texts``) and group equal answers."""
    extractor = extractor if isinstance(extractor, Extractor) else parse_extractor(extractor)
    texts = answer_texts(run)
    answers = dict(zip([s.index for s in run.samples], read_answers(texts, extractor)))
    by_answer: dict[str, AnswerGroup] = {}
    for s, text in zip(run.samples, texts):
        answer = answers[s.index]
        if answer is None:
            continue
        group = by_answer.setdefault(answer, AnswerGroup(answer, [], [], text))
        group.indices.append(s.index)
        group.seeds.append(s.seed)
    groups = sorted(by_answer.values(), key=lambda g: (-g.size, g.indices[0]))
    unanswered = [s for s in run.samples if answers[s.index] is None]
    return Answers(extractor.spec, run.n, answers, groups, [s.index for s in unanswered], [s.seed for s in unanswered])
