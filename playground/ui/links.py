"""Links that reproduce: the form's settings in the page's address, and a saved run by its key.

A **settings link** carries every setting of the form that differs from what the page starts with
(the request schema's defaults, and the layout's own starting values), as query parameters named
after the schema's fields (playground/request.py). Opening one fills the form and runs nothing; a
parameter that is not a setting of the form, or a value the schema refuses, is named in a
sentence and the setting is left at its default.

A **run link** is ``?run=KEY``: that run from the store (playground/store.py), shown read-only in
every tab for whoever has the link, with its settings in the form so Run asks for it again.

Links are made in the browser from the page's own address (``location``), so a link is right
behind a proxy that serves the app under a path (Gradio's ``root_path``); the server only makes
the query. A link is shown in a box as well as copied: a browser may refuse the clipboard.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import gradio as gr

from playground.errors import InvalidRequest
from playground.request import Limits, SampleRequest, did_you_mean, fields
from playground.run import Run
from playground.store import RunStore
from playground.ui.form import form_update, request_from_form
from playground.ui.keeping import Keeper
from playground.ui.markdown import code, plain
from playground.ui.messages import refusal, said, warn
from playground.ui.page import Page
from playground.ui.samples_area import SHOW_SAMPLES_JS
from playground.ui.saved_runs import SavedRuns, stored_run
from playground.ui.showing import show_opened

RUN = "run"  # the run link's parameter
# The page's address with the query the server made: the link, shown and (if allowed) copied.
ADDRESS_JS = """(query) => {
  if (!query) return "";
  const url = new URL(window.location.href);
  url.search = query === "?" ? "" : query;
  url.hash = "";
  const link = url.toString();
  if (navigator.clipboard) navigator.clipboard.writeText(link).catch(() => {});
  return link;
}"""

# A settings link copied before the form changed is no longer the form's: the Link box empties, so
# an old link is not sent by mistake. A run link stays: the run it opens has not changed.
STALE_JS = f"""(link) => {{
  try {{ return link && !new URL(link).searchParams.has("{RUN}") ? "" : link; }} catch (e) {{ return ""; }}
}}"""


@dataclass
class Links:
    form_btn: gr.Button
    run_btn: gr.Button
    query: gr.Textbox  # hidden: the query the server made, which the browser turns into a link
    link: gr.Textbox
    note: gr.Markdown  # the page's line on links and saved runs


def declare() -> Links:
    """The links' row, declared in the current layout (under the form)."""
    with gr.Row():
        form_btn = gr.Button("Copy link to these settings", size="sm", elem_id="copy-form-link")
        run_btn = gr.Button("Copy link to the run on screen", size="sm", elem_id="copy-run-link")
    query = gr.Textbox(visible="hidden", elem_id="link-query")
    link = gr.Textbox(label="Link", interactive=False, buttons=["copy"], elem_id="link",
                      placeholder="a link to the form's settings, or to the run on screen")
    note = gr.Markdown(elem_id="store-note")
    return Links(form_btn, run_btn, query, link, note)


def connect(links: Links, page: Page, saved: SavedRuns) -> None:
    """The buttons, and reading a link once the page has loaded (after it registered its
    browser's owner: an opened run joins that browser's History)."""
    defaults = starting_values(page)
    keeper = saved.keeper
    made = links.form_btn.click(warned_instead(lambda **form: settings_query(defaults, **form)), None, links.query,
                                inputs_kwargs=page.form, show_progress="hidden", api_visibility="private")
    run_made = links.run_btn.click(warned_instead(lambda run, session, action: run_query(keeper, run, session, action)),
                                   [page.current, page.samples.session, page.action], links.query,
                                   show_progress="hidden", api_visibility="private")
    for event in (made, run_made):
        event.then(None, links.query, links.link, js=ADDRESS_JS, show_progress="hidden", api_visibility="private")
    for component in page.form.values():  # in the browser alone: no request per keystroke
        component.change(None, links.link, links.link, js=STALE_JS, show_progress="hidden", api_visibility="private")
    store = keeper.store if keeper is not None else None
    opened = saved.loaded.then(opening(page, store, links), page.inputs(), [*page.outputs(), links.note],
                               inputs_kwargs=page.controls(), show_progress="hidden", api_visibility="private")
    # A run link is a run to look at: once it is shown, its samples come into view as after Run. A
    # settings link, or a run link that opened nothing, leaves the page at the form and its note.
    opened.success(None, None, None, js=f"() => {{ if (new URLSearchParams(location.search).has('{RUN}') && "
                                        "document.querySelector('#run-summary')?.innerText.trim()) "
                                        f"({SHOW_SAMPLES_JS.strip()})(); }}", show_progress="hidden",
                   api_visibility="private")


def warned_instead(make_query):
    """A link button's handler whose refusal (no run on screen, a form that is no request) is a
    warning, not an error: nothing went wrong. Its query is then empty, so the Link box is emptied
    and no earlier link is left to copy by mistake."""

    def query(*args, **kwargs) -> str:
        try:
            return make_query(*args, **kwargs)
        except gr.Error as e:
            warn(said(e))
            return ""

    return query


def starting_values(page: Page) -> dict[str, Any]:
    """The request the untouched form asks for, by field: what a link leaves out."""
    values = {name: c.value for name, c in page.form.items()}
    return dataclasses.asdict(request_from_form(**{**values, "prompt": values.get("prompt") or ""}))


def settings_query(defaults: dict[str, Any], **form) -> str:
    """The query of a settings link: each form setting that differs from ``defaults``, in the
    schema's order ("?" when none does); gr.Error names a value that is not one."""
    asked = dataclasses.asdict(request_from_form(**form))
    pairs = []
    for f, _ in fields():
        if f.name not in form:
            continue
        value, default = asked[f.name], defaults[f.name]
        if value == default and type(value) is type(default):
            continue
        if isinstance(value, list):
            pairs += [(f.name, str(item)) for item in value] or [(f.name, "")]
        else:
            pairs.append((f.name, _text(value)))
    return "?" + urlencode(pairs, quote_via=quote) if pairs else "?"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    return repr(value) if isinstance(value, float) else str(value)


def run_query(keeper: Keeper | None, run: Run | None, session, action=None) -> str:
    """The query of the run on screen's link; gr.Error when it has none (yet). While a run streams
    into the samples area, the run on screen is that one, which is kept (and has a link) once it
    ends: never the one before it."""
    if keeper is None:
        raise refusal("Runs are not kept (the app was started with --no-store), so a run has no link: "
                       "Export the run as a file instead.")
    if action is not None and action.streams:
        raise refusal("The run on screen is still streaming: it is kept as it ends, and its link can be made then.")
    if run is None:
        raise refusal("There is no run on screen yet.")
    owner, rid = keeper.owner(session), str(run.request.get("request_id") or "")
    key = keeper.store.key_of(owner, rid) if owner else None
    if key is None and owner:  # it may be saving still: a run is saved as it ends
        keeper.settle()
        key = keeper.store.key_of(owner, rid)
    if key is None:
        raise refusal("This run is not in the run store, so it has no link: its save failed (History's note says "
                      "why), it was deleted from History, or it was removed as the oldest to keep the store within "
                      "its limits. Export it as a file instead.")
    return "?" + urlencode([(RUN, key)])


def read_query(pairs: list[tuple[str, str]], names: list[str],
               limits: Limits) -> tuple[dict[str, Any], list[str], list[str]]:
    """The form's settings a link asks for (by field, as the request holds them), a sentence per
    parameter left out (not a setting of the form, or a value the schema refuses), and one per
    setting given more than once (its last value is used). Each value is checked as the server
    checks a request (with the link's n, which bounds the seed)."""
    given: dict[str, list[str]] = {}
    for name, value in pairs:
        given.setdefault(name, []).append(value)
    kinds = {f.name: f.type for f, _ in fields()}
    # Names and values are the link's, anybody's: written as text, never as markup (ui/markdown.py).
    problems = [f"{code(name)} is a setting of a request that the form does not hold (a run's link, or the API, "
                "carries it)" if name in kinds else f"{code(name)} is not a setting of the form"
                f"{plain(did_you_mean(name, names))}"
                for name in given if name not in names and name != RUN and not name.startswith("__")]
    twice = [f"{code(name)} is given {len(given[name])} times: the last, {plain(repr(given[name][-1]))}, is used"
             for name in names if len(given.get(name, ())) > 1 and not kinds[name].startswith("list[str]")]
    values: dict[str, Any] = {}
    for name in sorted((n for n in names if n in given), key=lambda n: n != "n"):  # n first
        raw: Any = given[name] if kinds[name].startswith("list[str]") else given[name][-1]
        if kinds[name].startswith("bool") and raw in ("true", "false"):
            raw = raw == "true"
        context = {"prompt": "x", **({"n": values["n"]} if "n" in values else {})}
        try:
            request = SampleRequest.from_user(**{**context, name: raw})
            request.check(limits)
        except InvalidRequest as e:  # named once: most refusals begin with the setting's name
            problems.append(plain(e) if str(e).startswith(name) else f"{code(name)}: {plain(e)}")
            continue
        values[name] = getattr(request, name)
    return values, problems, twice


def opening(page: Page, store: RunStore | None, links: Links):
    """The page's load listener for a link (Gradio reads the type of ``request`` from this function)."""

    async def opened(history, session, selected, request: gr.Request, **settings) -> dict:
        pairs = request.query_params.multi_items() if request is not None else []
        return await open_link(page, store, links, pairs, history, session, selected, settings)

    return opened


async def open_link(page: Page, store: RunStore | None, links: Links, pairs: list[tuple[str, str]], history, session,
                    selected, settings: dict) -> dict:
    keys = [value for name, value in pairs if name == RUN]
    if keys:
        update = await _open_run(page, store, links, keys[-1], history, session, selected, settings)
        if others := sorted({name for name, _ in pairs if name != RUN and not name.startswith("__")}):
            update[links.note] += (f" The link's {', '.join(code(name) for name in others)} went unused: a run "
                                   "link opens the run as it was saved.")
        return update
    values, problems, twice = read_query(pairs, list(page.form), page.backend.limits)
    if not values and not problems and not twice:
        return {links.note: gr.skip()}
    update, unfit = form_update(page.form, values)
    problems += unfit
    note = (f"The link set {len(update)} setting{'s' if len(update) != 1 else ''} of the form; press Run to run it."
            if update else "The link set no setting of the form.")
    if problems:
        note += " Left at their defaults: " + "; ".join(problems) + "."
    if twice:
        note += " " + "; ".join(twice) + "."
    update[links.note] = note
    return update


async def _open_run(page: Page, store: RunStore | None, links: Links, key: str, history, session, selected,
                    settings: dict) -> dict:
    if store is None:
        return {links.note: "⚠️ This link names a saved run, but this app keeps no runs (it was started with "
                            "`--no-store`)."}
    run = await asyncio.to_thread(stored_run, store, key)
    if run is None:
        return {links.note: "⚠️ The run this link names is not in the run store: it was deleted, or removed "
                            "to make room (the store keeps a limited number of runs), or the link is mistyped."}
    update, told = await show_opened(page, run, history, session, selected, settings)
    update[links.note] = f"Opened run `{run.request.get('request_id')}` from its link (read-only): {told}"
    return update
