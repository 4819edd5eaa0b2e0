"""The form's live feedback: the rendered prompt as you type, the columns as n moves, and the
engine status line when the page opens."""

from __future__ import annotations

import gradio as gr

from playground.ui import views
from playground.ui.handlers import COLUMNS_PER_ROW, Handlers

PLACEHOLDER = "‹your prompt›"


class Controls:
    def __init__(self, h: Handlers):
        self.h = h

    async def render_prompt(self, prompt: str, use_chat_template: bool) -> str:
        """What the model receives; before anything is typed, what the chat template wraps it in."""
        empty = not prompt or not prompt.strip()
        if empty and not use_chat_template:
            return "The prompt is sent exactly as you type it (no chat template)."
        try:
            rendered, token_ids = await self.h.backend.render(PLACEHOLDER if empty else prompt,
                                                              bool(use_chat_template))
        except Exception as e:  # shown in place; the run itself reports errors properly
            return f"⚠️ {e}"
        if empty:
            return views.template_preview(rendered)
        return views.rendered_prompt(rendered, len(token_ids))

    def show_columns(self, n) -> dict:
        """Show the first n columns, and only the rows that hold them (hidden rows keep their gap)."""
        c = self.h.c
        try:
            n = int(n)
        except (TypeError, ValueError):
            return {}
        return {**{r: gr.update(visible=k * COLUMNS_PER_ROW < n) for k, r in enumerate(c.rows)},
                **{g: gr.update(visible=i < n) for i, g in enumerate(c.groups)}}

    async def on_load(self, prompt: str, use_chat_template: bool) -> tuple[str, str]:
        """A new session: the engine as it is now (no run of this session yet), and the preview
        for the form's defaults."""
        return (views.engine_status(await self.h.backend.status()),
                await self.render_prompt(prompt, use_chat_template))
