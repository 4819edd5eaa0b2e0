"""Saved runs in the History tab: this browser's runs from the run store (playground/store.py),
across reloads and restarts, newest first, searchable by prompt, with Open and Delete.

Every run the page shows at its end (finished, stopped, or opened) is saved where it is shown
(ui/keeping.py); a run that fails raises instead of being shown, so the run events' failure saves
it here. When a save is done, the page hears how it went: a store that is full or fails leaves
the run on screen and says so in a sentence; old runs removed to make room are said too.

The server lists a browser's runs by the owner token its page registered at load (keeping.py),
and never lists one browser's runs to another.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial

import gradio as gr

from playground.analysis import truncate
from playground.errors import InvalidBundle
from playground.run import Run
from playground.store import RunStore, StoreError
from playground.ui.keeping import MARKER, OWNER_JS, Keeper
from playground.ui.messages import refusal, warned
from playground.ui.page import Page
from playground.ui.running import open_refusal
from playground.ui.showing import show_opened
from playground.ui.views import status_word

log = logging.getLogger(__name__)
NOT_KEPT = ("Runs are kept in this tab's memory only: the app was started with `--no-store`, so a reload loses "
            "them and a run has no link.")


@dataclass
class SavedRuns:
    keeper: Keeper | None  # None: no store (--no-store)
    marker: gr.State  # a new value per run shown: its change reports the save
    owner: gr.Textbox  # hidden: the browser's owner token, as its page's load script reads it
    search: gr.Textbox | None
    pick: gr.Dropdown | None
    open_btn: gr.Button | None
    delete_btn: gr.Button | None
    undo_btn: gr.Button | None  # shown after a Delete: puts the run back, link and all
    deleted: gr.State  # the row of the run deleted last, for Undo
    note: gr.Markdown  # the History tab's line on the store
    loaded: object = None  # the page's load event (after it registered the owner), for links to follow


def declare(store: RunStore | None) -> SavedRuns:
    """The History tab's saved runs, declared in the current layout (inside the tab)."""
    marker = gr.State("")
    owner = gr.Textbox(visible="hidden", elem_id="owner")
    if store is None:
        return SavedRuns(None, marker, owner, None, None, None, None, None, gr.State(None),
                         gr.Markdown(NOT_KEPT, elem_id="saved-note"))
    with gr.Group():
        with gr.Row():
            search = gr.Textbox(label="Search the prompts", placeholder="a word of the prompt", elem_id="saved-search",
                                scale=2)
            pick = gr.Dropdown(choices=[], label="Saved runs of this browser, newest first", elem_id="saved-pick",
                               scale=5)
        with gr.Row():
            open_btn = gr.Button("Open saved run", elem_id="saved-open")
            delete_btn = gr.Button("Delete saved run", variant="stop", elem_id="saved-delete")
            undo_btn = gr.Button("Undo delete", visible=False, elem_id="saved-undo")
    note = gr.Markdown(elem_id="saved-note")
    return SavedRuns(Keeper(store, marker), marker, owner, search, pick, open_btn, delete_btn, undo_btn,
                     gr.State(None), note)


def extra(saved: SavedRuns) -> dict:
    """What showing a run writes besides the page (``Page.extra``): the marker."""
    return {MARKER: saved.marker} if saved.keeper is not None else {}


def connect(saved: SavedRuns, page: Page, failed: list, demo: gr.Blocks, stopped: gr.events.Dependency) -> None:
    """The listeners: the owner's registration at load, each save's outcome, the list, Open and
    Delete. The page's line by the form (``page.said``) says what must be seen (a run not saved,
    old runs removed, a run opened); ``failed``: the run events whose failure leaves a failed run
    in ``page.action``; ``stopped``: Stop's event, which shows the stopped run outside Gradio's
    queue, where a State it changes fires no change event: the save's outcome follows it instead."""
    if saved.keeper is None:
        saved.loaded = demo.load(lambda: gr.skip(), None, saved.owner, api_visibility="private")
        return
    session, say = page.samples.session, page.said
    listed = [saved.pick, saved.note]
    saved.loaded = demo.load(partial(register, saved, say), [saved.owner, session, saved.search],
                             [saved.owner, *listed, say], js=OWNER_JS, show_progress="hidden", api_visibility="private")
    for shown in (saved.marker.change, stopped.then):  # a marker's save is reported once: the first asks
        shown(partial(report, saved, say), [saved.marker, session, saved.search], [*listed, say],
              show_progress="hidden", api_visibility="private")
    for event in failed:
        event.failure(partial(save_failed, saved, say), [page.action, session, saved.search], [*listed, say],
                      show_progress="hidden", api_visibility="private")
    for trigger in (saved.search.submit, saved.search.change):
        trigger(partial(listing, saved), [session, saved.search], listed, show_progress="hidden",
                trigger_mode="always_last", api_visibility="private")
    saved.delete_btn.click(partial(delete, saved), [saved.pick, session, saved.search],
                           [*listed, saved.deleted, saved.undo_btn], api_visibility="private")
    saved.undo_btn.click(partial(undo, saved), [saved.deleted, session, saved.search],
                         [*listed, saved.deleted, saved.undo_btn], api_visibility="private")
    saved.open_btn.click(partial(open_saved, saved, page), [saved.pick, *page.inputs()], [*page.outputs(), say],
                         inputs_kwargs=page.opening(), api_visibility="private")


async def register(saved: SavedRuns, say, owner: str | None, session, search: str | None) -> dict:
    """The page's load: its browser's owner token (from its load script) for this session; and
    when this browser kept a run a moment ago (a reload mid-run, a tab closed by mistake), the
    line by the form says where it is (a link opened by the page says its own line over it)."""
    if not owner:  # a browser without storage: runs are not listed, and not kept
        return {saved.owner: gr.skip(), saved.note: "This browser keeps no local storage: its runs are not kept.",
                say: gr.skip()}
    saved.keeper.register(session, owner)
    newest = await asyncio.to_thread(saved.keeper.store.entries, owner, "", 1)
    return {saved.owner: owner, **await listing(saved, session, search),
            say: recent_note(newest[0], time.time()) if newest else gr.skip()}


RECENT_S = 600  # a run kept this recently is one a reload or a closed tab most likely cut short


def recent_note(entry, now: float):
    """The line for this browser's last run when it was kept less than ``RECENT_S`` ago, else a skip."""
    age = now - entry.saved_at
    if not 0 <= age <= RECENT_S:
        return gr.skip()
    ago = "a moment ago" if age < 5 else f"{int(age)} s ago" if age < 60 else f"{int(age // 60)} min ago"
    return (f"Your last run, `{entry.request_id}` ({status_word(entry.status)} {ago}), is kept: History → "
            "**Open saved run** puts it back on screen, its settings in the form.")


async def report(saved: SavedRuns, say, value: str | None, session, search: str | None) -> dict:
    """A run was shown: how its save went, and the list again."""
    future = saved.keeper.saving(value) if value else None
    return await _outcome(saved, say, future, session, search)


async def save_failed(saved: SavedRuns, say, action, session, search: str | None) -> dict:
    """A run event failed: save what it had recorded. ``action``: the session's run in flight (one
    run, or an action holding several, each with its ``run``)."""
    runs = [action.run] if hasattr(action, "run") else [r.run for r in getattr(action, "runs", ())]
    update = {saved.note: gr.skip()}
    for run in runs:
        if run is not None:
            update = await _outcome(saved, say, saved.keeper.save(run, session), session, search)
    return update


async def _outcome(saved: SavedRuns, say, future: Future | None, session, search: str | None) -> dict:
    if future is None:
        return {saved.note: gr.skip()}
    try:
        kept = await asyncio.wrap_future(future)
    except StoreError as e:
        log.warning("a run was not saved: %s", e)
        message = f"⚠️ {str(e)[0].upper()}{str(e)[1:]}. The run stays on screen: Export can still save it as a file."
        return {say: message, saved.note: message}
    update = await listing(saved, session, search)
    if kept is not None and kept.pruned:
        update[say] = update[saved.note] = (
            f"The run store keeps at most {saved.keeper.store.limits.describe()} for everyone who uses this app: the "
            f"{kept.pruned} oldest run{'s were' if kept.pruned > 1 else ' was'} removed to keep this one.")
    return update


async def listing(saved: SavedRuns, session, search: str | None) -> dict:
    return await asyncio.to_thread(_listing, saved, saved.keeper.owner(session), search)


def _listing(saved: SavedRuns, owner: str | None, search: str | None) -> dict:
    store = saved.keeper.store
    entries = store.entries(owner, (search or "").strip()) if owner else []
    total = store.count(owner) if owner else 0
    shown = f" ({len(entries)} match)" if search and search.strip() else ""
    # Not the store's path: the page may be open to others than whoever started the app.
    where = (f"{total} run{'s' if total != 1 else ''} of this browser {'are' if total != 1 else 'is'} kept in "
             f"the app's run store{shown}; it keeps at most {store.limits.describe()}, the oldest removed first.")
    # The newest (or the first match) picked: after a reload the list reads as what it holds, not as
    # nothing saved, and Open opens the run a person most likely came back for.
    newest = entries[0].key if entries else None
    return {saved.pick: gr.update(choices=[(label(e), e.key) for e in entries], value=newest), saved.note: where}


def label(entry) -> str:
    when = datetime.datetime.fromtimestamp(entry.saved_at).strftime("%Y-%m-%d %H:%M")
    prompt = " ".join(entry.prompt.split())
    prompt = truncate(prompt, 51)
    origin = f" · {entry.origin}" if entry.origin else ""
    settings = f" · {entry.settings}" if entry.settings else ""
    return f"{when} · {status_word(entry.status)} · n={entry.n}{settings}{origin} · “{prompt}” · {entry.request_id}"


async def delete(saved: SavedRuns, key: str | None, session, search: str | None) -> dict:
    owner = saved.keeper.owner(session)
    if not key or not owner:
        return warned("Pick a saved run first.")
    row = await asyncio.to_thread(saved.keeper.store.delete, owner, key)
    if row is None:
        return warned("That run is not among this browser's saved runs (it was removed already).")
    update = await listing(saved, session, search)
    update[saved.note] = f"Deleted `{row[2]}`: **Undo delete** puts it back, its link too. " + update[saved.note]
    return {**update, saved.deleted: row, saved.undo_btn: gr.update(visible=True)}


async def undo(saved: SavedRuns, row: tuple | None, session, search: str | None) -> dict:
    """The run deleted last, back in the store as it was (its key, its place in the list)."""
    if row is None or row[1] != saved.keeper.owner(session):
        return {saved.deleted: None, saved.undo_btn: gr.update(visible=False)}
    await asyncio.to_thread(saved.keeper.store.restore, row)
    update = await listing(saved, session, search)
    update[saved.note] = f"`{row[2]}` is back. " + update[saved.note]
    return {**update, saved.deleted: None, saved.undo_btn: gr.update(visible=False)}


def stored_run(store: RunStore, key: str) -> Run | None:
    """The run of a key, or None when the store has none; gr.Error for one it cannot read."""
    try:
        text = store.load(key)
        return None if text is None else Run.from_json(text)
    except (StoreError, InvalidBundle) as e:
        raise refusal(f"The saved run cannot be opened: {e}.") from None


async def open_saved(saved: SavedRuns, page: Page, key: str | None, history, session, selected, action=None,
                     **settings) -> dict:
    """A saved run on screen, its settings in the form, as its link opens it, and the line by the
    form (``page.said``) saying so."""
    if not key:
        return warned("Pick a saved run first.")
    if why := open_refusal(action):
        return warned(why)
    run = await asyncio.to_thread(stored_run, saved.keeper.store, key)
    if run is None:
        return warned("That run is no longer in the store: the oldest runs are removed when it is full.")
    update, said = await show_opened(page, run, history, session, selected, settings)
    update[page.said] = f"Opened saved run `{run.request.get('request_id')}`: {said}"
    return update
