"""How a rule is written: one function per rule, registered with its name and meaning.

A rule reads a ``Subject`` (one run, and what the QA matrix knows around it) and yields a message
for each way the run breaks it, or ``unchecked(reason)`` when the run cannot show whether it holds
(a remote server's objects cannot be watched, say). The rule table (names and meanings, for the
matrix's JSON, its report, the tests and the UI) is read from the rulebooks, so a rule's name, its
meaning and its check are written once, side by side, and cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from playground.run import Event, Run


@dataclass
class Violation:
    rule: str  # a rule's name
    message: str  # for people: which sample, which event

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


@dataclass
class Unchecked:
    """A rule the run could not be held to, and why (not a failure: nothing was seen either way)."""

    rule: str
    reason: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.reason}"


def unchecked(reason: str) -> Unchecked:
    """What a rule yields when the run cannot show whether it holds; the rulebook names the rule."""
    return Unchecked("", reason)


@dataclass
class Subject:
    """What the rules see: one run, and what the QA matrix knows around it. Everything but the run
    is optional: a hand-built run is checked by the rules that need nothing else."""

    run: Run | None
    # The same request's FINAL_ONLY run on the same path, when it ran in the same conditions.
    final: Run | None = None
    source: str = ""  # the path it came from, for messages ("sync wrapper")
    error: str | None = None  # what the path raised instead of returning a run
    before: int | None = None  # requests unfinished on the run's engine when it started (None: unknown)
    after: int | None = None  # ... when it had ended
    stopped: Run | None = None  # the same request once more, stopped after its first output
    after_stop: int | None = None  # requests unfinished on the engine as soon as that stop returned
    settled_after_stop: float | None = None  # when that was not 0: seconds until it was (None: not within the wait)
    stop_error: str | None = None  # what the path raised when that run was stopped

    @property
    def n(self) -> int:
        return int(self.run.request.get("n", self.run.n))

    @property
    def kind(self) -> str:
        return self.run.output_kind

    @property
    def events(self) -> list[Event]:
        return self.run.events


Finding = str | Unchecked  # a violation's message, or why the rule could not be checked
Check = Callable[[Subject], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    name: str  # short and stable: tests and tools match on it
    meaning: str  # what it asks of a run, for people
    check: Check
    needs_run: bool = True  # False: it also judges a path that raised instead of returning a run


@dataclass
class Judgement:
    violations: list[Violation] = field(default_factory=list)  # in rule order
    unchecked: list[Unchecked] = field(default_factory=list)


class Rulebook:
    """Rules in the order they are written (the order of violations and of the table)."""

    def __init__(self, rules: Iterable[Rule] = ()):
        self.rules: list[Rule] = list(rules)

    def rule(self, name: str, meaning: str, needs_run: bool = True) -> Callable[[Check], Check]:
        """Register the decorated function as the rule ``name``, which means ``meaning``."""
        def register(check: Check) -> Check:
            if any(r.name == name for r in self.rules):
                raise ValueError(f"two rules are named {name!r}")
            self.rules.append(Rule(name, meaning, check, needs_run))
            return check

        return register

    def __add__(self, other: Rulebook) -> Rulebook:
        names = {r.name for r in self.rules} & {r.name for r in other.rules}
        if names:
            raise ValueError(f"rules named twice: {', '.join(sorted(names))}")
        return Rulebook([*self.rules, *other.rules])

    def table(self) -> dict[str, str]:
        """Every rule's name and meaning, in order."""
        return {r.name: r.meaning for r in self.rules}

    def judge(self, subject: Subject) -> Judgement:
        """Every rule ``subject`` breaks (in rule order, each rule's findings in the order found),
        and the rules it could not be held to."""
        judgement = Judgement()
        for r in self.rules:
            if r.needs_run and subject.run is None:
                continue
            for finding in r.check(subject):
                if isinstance(finding, Unchecked):
                    judgement.unchecked.append(Unchecked(r.name, finding.reason))
                else:
                    judgement.violations.append(Violation(r.name, finding))
        return judgement


# --- what several rules need -----------------------------------------------------------------------

def finished_at(events: list[Event]) -> dict[int, int]:
    """Each index's first event carrying its finish_reason: where the caller saw it finish."""
    found: dict[int, int] = {}
    for number, event in enumerate(events):
        for out in event.outputs:
            if out.finish_reason is not None and out.index not in found:
                found[out.index] = number
    return found


def listed(items: Iterable) -> str:
    return ", ".join(map(str, items))


def numbers(items: list[int], most: int = 8) -> str:
    """A list of event numbers for a message, cut after ``most``."""
    return listed(items[:most]) + (f", … ({len(items)} in all)" if len(items) > most else "")


def clip(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[:width] + "…")
