"""A first UI: a prompt box that streams one completion. The full playground replaces it."""

from __future__ import annotations

import gradio as gr

from playground.backend import record
from playground.errors import PlaygroundError
from playground.request import SampleRequest


def build_app(backend) -> gr.Blocks:
    async def sample(prompt: str):
        try:
            async for run in record(backend, SampleRequest.from_user(prompt=prompt, n=1)):
                yield run.samples[0].text
        except PlaygroundError as e:
            raise gr.Error(str(e)) from None

    with gr.Blocks(title="vLLM parallel-sampling playground") as demo:
        prompt = gr.Textbox(label="Prompt")
        output = gr.Textbox(label="Completion")
        gr.Button("Run").click(sample, prompt, output, api_name="sample")
    return demo
