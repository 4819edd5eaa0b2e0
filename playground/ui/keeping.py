"""Keeping runs: the run store's side of showing a run.

Every run the page shows at its end is saved right where it is shown (``showing.show`` calls
``keep``), on the server, for the browser whose page shows it: nothing waits for the browser to
ask, so a reload or a closed tab just as a run ends still keeps it; a run whose tab went away
mid-run is kept as it stopped, and a streamed run is saved as its stream ends, before the browser
asks for its end to be shown (``keep_unshown``): a browser offline then, which reloads the page
when it is back, would never ask. The save runs in a thread of
its own (a long run's bundle takes seconds to write) and the page does not wait for it; the
History tab's listener (ui/saved_runs.py) reports how it went when the browser is still there.

Whose runs: each browser makes a random owner token once and keeps it in its local storage (a
script at page load reads it, or makes it). The load registers it for the page's session, keyed
by the session's own per-browser object (the samples area's session state, which every handler
that shows a run receives), so ``keep`` knows the owner without another input. Gradio's
``BrowserState`` is not used for the token: it reads the storage only once mounted and stores
only what the server sends back, so a token made on the server and lost on its way back (a page
closed right after a run) would lose the browser its list.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from playground.run import Run
from playground.store import RunStore, Saved
from playground.ui.views import origin_marks, settings_marks

MARKER = "kept_run"  # Page.extra's state that takes a new value per run shown: its change reports the save
# The browser's owner token: made once with the browser's own random numbers, kept in its storage.
OWNER_JS = """(owner, ...rest) => {
  const name = "vllm-playground-owner";
  let token = window.localStorage.getItem(name);
  if (!token) {
    const bytes = new Uint8Array(18);
    window.crypto.getRandomValues(bytes);
    token = btoa(String.fromCharCode(...bytes)).replace(/\\+/g, "-").replace(/\\//g, "_");
    window.localStorage.setItem(name, token);
  }
  return [token, ...rest];
}"""
_keepers: weakref.WeakValueDictionary[int, Keeper] = weakref.WeakValueDictionary()  # by id(marker state)
_shown = itertools.count(1)
MAX_UNREPORTED = 1000


class Keeper:
    """One app's keeping: its store, each session's owner, and the saves under way."""

    def __init__(self, store: RunStore, marker):
        self.store = store
        self._owners: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # session object -> owner token
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="run-store")
        self._saves: dict[str, Future] = {}  # by marker value, until the page asks how it went
        self._early: dict[str, Future] = {}  # by request id: saves begun before the run was shown
        self._lock = threading.Lock()
        _keepers[id(marker)] = self

    def register(self, session, owner: str) -> None:
        with self._lock:
            self._owners[session] = owner

    def owner(self, session) -> str | None:
        with self._lock:
            return self._owners.get(session) if session is not None else None

    def keep(self, runs: list[Run], session) -> str:
        """Start saving ``runs`` (one shown run, or What if's branches) for the session's browser, as
        one save the page hears about once; the marker's new value."""
        value = f"{runs[-1].request.get('request_id')} {next(_shown)}"
        owner = self.owner(session)
        finished = [run for run in runs if run.finished]
        if owner is not None and finished:
            with self._lock:
                early = self._early.pop(str(runs[0].request.get("request_id")), None) if len(runs) == 1 else None
                # a run saved as its stream ended: the page hears how that save went (a prune, a full disk)
                self._saves[value] = early or self._pool.submit(save_runs, self.store, owner, finished)
                while len(self._saves) > MAX_UNREPORTED:  # pages that went away before asking
                    self._saves.pop(next(iter(self._saves)))
        return value

    def save(self, run: Run, session) -> Future | None:
        """Save ``run`` now (a failed run, which is not shown)."""
        owner = self.owner(session)
        return None if owner is None or not run.finished else self._pool.submit(save_run, self.store, owner, run)

    def save_early(self, run: Run, session) -> None:
        """Save ``run`` before it is shown; showing it then reports this save (``keep``)."""
        owner = self.owner(session)
        if owner is not None and run.finished:
            with self._lock:
                self._early[str(run.request.get("request_id"))] = self._pool.submit(save_runs, self.store, owner,
                                                                                    [run])
                while len(self._early) > MAX_UNREPORTED:  # runs never shown (their pages went away)
                    self._early.pop(next(iter(self._early)))

    def settle(self, timeout: float = 60.0) -> None:
        """Wait for the saves under way (they run one after another)."""
        self._pool.submit(lambda: None).result(timeout)

    def saving(self, value: str) -> Future | None:
        """The save a marker value started (once: it is forgotten then)."""
        with self._lock:
            return self._saves.pop(value, None)


def keep(marker, runs: list[Run], session) -> str | None:
    """Save ``runs`` with the keeper of this marker's page, if it has one: ``showing.show``'s hook
    (the run shown), and What if's (its branches, which join History without being shown)."""
    keeper = _keepers.get(id(marker))
    return keeper.keep(runs, session) if keeper is not None and runs else None


def keep_unshown(marker, run: Run, session) -> None:
    """Save a run whose stream ended, before it is shown: its tab may be closed or reloaded mid-run
    (stopped as its stream closed), or offline as it ends, and never ask for its end; the
    browser's History has it after the reload all the same."""
    keeper = _keepers.get(id(marker))
    if keeper is not None:
        keeper.save_early(run, session)


def save_runs(store: RunStore, owner: str, runs: list[Run]) -> Saved | None:
    """Keep each run; what the page says of them: the last one saved, with every run pruned to make
    room (None: each was kept before). A store that refuses one refuses the rest too (a full disk)."""
    kept = [saved for saved in (save_run(store, owner, run) for run in runs) if saved is not None]
    return replace(kept[-1], pruned=sum(saved.pruned for saved in kept)) if kept else None


def save_run(store: RunStore, owner: str, run: Run) -> Saved | None:
    """Keep a run for ``owner`` once (None: it kept it before, or another browser keeps it: a run
    opened by its link is not written again, where each viewer's copy would push the store's
    oldest runs out, the link's own run among them; nothing written)."""
    rid = str(run.request.get("request_id") or "")
    if store.key_of(owner, rid) is not None or store.holds(rid):
        return None
    return store.save(owner, rid, str(run.request.get("prompt") or ""), run.status, run.n, run.to_json(),
                      origin_marks(run), settings_marks(run))
