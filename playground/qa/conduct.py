"""Rules of a path's conduct beyond the values it yields: what it hands out, under which id, what
the engine counts, and whether it returned a run at all.

These are the ways n > 1 has gone wrong: earlier CUMULATIVE outputs changed by later tokens, outputs
keyed by a child's id, and an engine that counts a parent where it runs its children. Where a path
cannot show a fact (a remote server's objects, its per-output counts) the rule says so
(``unchecked``) instead of passing or failing on nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from playground.qa.rules import Finding, Rulebook, Subject, finished_at, listed, numbers, unchecked
from playground.run import Run

book = Rulebook()

REMOTE = "openai"  # Run.engine["backend"] of a run made by the remote backend


@book.rule("no-mutation",
           "an output a path yielded never changes afterwards: every yielded object is kept with a snapshot "
           "taken when it was yielded and compared at the run's end (the bug class where later tokens grow "
           "the earlier CUMULATIVE outputs a caller kept). Not observable on a remote server: its stream is "
           "parsed into new objects on the client")
def no_mutation(s: Subject) -> Iterator[Finding]:
    changed = s.run.mutated_events
    if changed is None:
        yield unchecked(_remote(s.run, "the remote path parses the server's stream into new objects on the client, "
                                       "so a change to the server's own objects cannot be seen here (only its "
                                       "effect on the values, which cumulative-grows and delta-concat check)")
                        or "the path did not watch the outputs it yielded (record(..., watch=True))")
    elif changed:
        yield (f"{len(changed)} of {len(s.events)} outputs changed after they were yielded (event "
               f"{numbers(changed)}): a caller that kept them saw them change")


@book.rule("parent-id",
           "every output of a parent carries the parent's request id (the run's request_id), on every path: "
           "never a child's id")
def parent_id(s: Subject) -> Iterator[Finding]:
    expected = s.run.request.get("request_id")
    ids = [e.request_id for e in s.events]
    if expected is None or all(i is None for i in ids):
        yield unchecked(_remote(s.run, "the remote path rebuilds every output on the client from the server's "
                                       "chunks and records no request id with it")
                        or "the run records no request id" + (" for its outputs" if expected else ""))
        return
    wrong = [(k, i) for k, i in enumerate(ids) if i != expected]
    if wrong:
        k, got = wrong[0]
        carried = "no request id" if got is None else f"the request id {got!r}"
        others = list(dict.fromkeys(i for _, i in wrong[1:]))
        more = (f" (so do {len(wrong) - 1} more of its {len(ids)} events, with {listed(map(repr, others[:4]))}"
                + (", …" if len(others) > 4 else "") + ")") if len(wrong) > 1 else ""
        yield f"event {k} carries {carried}, not the parent's {expected!r}{more}"


@book.rule("accounting",
           "the engine counts a parent's children, not the parent: every output records how many requests the "
           "engine had unfinished when it reached the caller (get_num_unfinished_requests(); measured on vLLM "
           "0.32 for wrapper and native alike, on AsyncLLM and LLMEngine: n per parent). On a run alone on its "
           "engine no output counts more than the run's unfinished children (n minus those finished by then: a "
           "finished child has left), a streamed kind's first output counts exactly those, and the engine is "
           "back to 0 when the run has ended and as soon as a run stopped at its first output has been closed "
           "(as vLLM's own generate() aborts before its close returns). A remote server's "
           "per-output counts are not observable; its before and after counts come from its /metrics, and as it "
           "learns of a stop from the closed connection, it has the matrix's wait to get back to 0")
def accounting(s: Subject) -> Iterator[Finding]:
    if s.before is None or s.after is None:
        yield unchecked("the engine's count of unfinished requests around the run is unknown")
    elif s.before != 0:
        yield unchecked(f"{_requests(s.before)} of others were in flight on the engine when the run started, so "
                        "the counts are not this run's alone")
    elif s.after != 0:
        yield (f"the engine still had {_requests(s.after)} unfinished after the run ended, and none when it "
               "started: a child was left running (or another client started a request meanwhile)")
    else:
        yield from _counts(s)
    yield from _stopped(s)


def _counts(s: Subject) -> Iterator[Finding]:
    """The per-output counts of a run that was alone on its engine, held to its unfinished children."""
    counted = [(k, e.engine_requests) for k, e in enumerate(s.events) if e.engine_requests is not None]
    if not counted:
        yield unchecked(_remote(s.run, "a remote server's count is read from its /metrics before and after the "
                                       "run, not with each output")
                        or "the path did not record the engine's count with each output")
        return
    n, finished = s.n, finished_at(s.events)

    def unfinished(k: int) -> int:  # the run's children not finished by event k, as the caller saw them
        return n - sum(1 for index, at in finished.items() if at <= k and 0 <= index < n)

    over = [(k, count) for k, count in counted if count > unfinished(k)]
    if over:
        k, count = over[0]
        more = f" (and {len(over) - 1} more events count too many)" if len(over) > 1 else ""
        yield (f"event {k} counts {_requests(count)} unfinished in the engine, but only {unfinished(k)} of the "
               f"run's {n} children were unfinished then{more}")
    count = s.events[0].engine_requests if s.events else None
    if s.kind != "FINAL_ONLY" and count is not None and count < unfinished(0):
        yield (f"the first event counts {_requests(count)} unfinished in the engine, expected the run's "
               f"{unfinished(0)} unfinished children: the engine counts each child"
               + (", not the parent" if count == 1 else ""))


def _stopped(s: Subject) -> Iterator[Finding]:
    """After the same request was stopped at its first output, nothing of it is left in the engine."""
    if s.stopped is None or s.after != 0:  # no stop made, or the engine was not idle when it began
        return
    if s.stopped.status != "aborted":
        yield unchecked(f"the run meant to be stopped at its first output ended {s.stopped.status} before it")
    elif s.after_stop is None:
        yield unchecked("the engine's count after the stopped run is unknown")
    elif s.after_stop != 0 and (s.settled_after_stop is None or not _is_remote(s.run)):
        # A server learns of a stop from the closed connection, in its own time: it only has to be idle
        # within the matrix's wait. An embedded engine is told before the close returns.
        later = ("not 0 within the matrix's wait: the stop did not abort every child" if s.settled_after_stop is None
                 else f"0 again {s.settled_after_stop:.2f} s later: the stop returned while its children were still "
                      "in the engine")
        yield (f"after a run of this request was stopped at its first output, the engine still had "
               f"{_requests(s.after_stop)} unfinished as the stop returned, and {later}")


@book.rule("run-error", "the path returned a run instead of raising (also when a run of it was stopped)",
           needs_run=False)
def run_error(s: Subject) -> Iterator[Finding]:
    where = f"the {s.source} path" if s.source else "the path"
    if s.run is None:
        yield f"{where} raised: {s.error}"
    if s.stop_error is not None:
        yield f"{where} raised when a run of it was stopped: {s.stop_error}"


def _requests(count: int) -> str:
    return f"{count} request" + ("" if count == 1 else "s")


def _is_remote(run: Run) -> bool:
    return run.engine.get("backend") == REMOTE


def _remote(run: Run, reason: str) -> str | None:
    """``reason``, when ``run`` came from a remote server (else None: the caller says why)."""
    return reason if _is_remote(run) else None
