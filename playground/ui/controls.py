"""The form's live feedback: the rendered prompt as you type, and the engine status line when the
page opens."""

from __future__ import annotations

from playground.errors import InvalidRequest
from playground.request import check_prompt_text
from playground.ui import views
from playground.ui.page import Page

PLACEHOLDER = "‹your prompt›"


async def render_prompt(page: Page, prompt: str, use_chat_template: bool) -> str:
    """What the model receives; before anything is typed, what the chat template wraps it in."""
    empty = not prompt or not prompt.strip()
    if empty and not use_chat_template:
        return "The prompt is sent exactly as you type it (no chat template)."
    if not empty:
        try:
            check_prompt_text(prompt, page.backend.limits)
        except InvalidRequest as e:  # Run would refuse it: nothing is tokenized for a preview
            return f"⚠️ No preview: {e}."
    try:
        rendered, token_ids = await page.backend.render(PLACEHOLDER if empty else prompt, bool(use_chat_template))
    except Exception as e:  # shown in place; the run itself reports errors properly
        return f"⚠️ {e}"
    if empty:
        return views.template_preview(rendered)
    return views.rendered_prompt(rendered, len(token_ids))


async def preview_and_status(page: Page, prompt: str, use_chat_template: bool, current=None) -> tuple[str, str]:
    """``render_prompt``, and the engine line as that left it: a server's rendering asks its health
    beside it, so a server that went away while the page sat idle shows as down as soon as the
    prompt changes, not at the next Run (``current``: the run on screen, which the line speaks of)."""
    preview = await render_prompt(page, prompt, use_chat_template)
    return preview, views.engine_status(page.backend.info(), current)


async def on_load(page: Page, prompt: str, use_chat_template: bool) -> tuple[str, str]:
    """A new session: the engine as it is now (no run of this session yet), and the preview for
    the form's defaults."""
    return views.engine_status(await page.backend.status()), await render_prompt(page, prompt, use_chat_template)
