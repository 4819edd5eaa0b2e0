"""Prompt text <-> token ids, one way for every path.

The async wrapper, vLLM's native path and the sync wrapper must see the same prompt token ids,
or comparing their samples means nothing. So the prompt is rendered and tokenized once, here,
and every path is handed the ids.
"""

from __future__ import annotations

from vllm import TokensPrompt


def render(tokenizer, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
    """The exact string the model sees (with the chat template applied, if asked) and its ids."""
    if use_chat_template:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        # The template already wrote the special tokens; encoding must not add them again.
        return rendered, tokenizer.encode(rendered, add_special_tokens=False)
    return prompt, tokenizer.encode(prompt)


def tokenize(tokenizer, prompt: str | TokensPrompt) -> TokensPrompt:
    """A TokensPrompt as is; a string tokenized the way vLLM would (special tokens included)."""
    if isinstance(prompt, dict):
        return prompt
    return TokensPrompt(prompt_token_ids=tokenizer.encode(prompt), prompt=prompt)


def for_engine(engine, prompt: str | TokensPrompt):
    """The prompt as vLLM's engines take it: rendered by the engine's own Renderer, once. The
    children of a parent all get this one rendering, rather than vLLM rendering it again for each
    (and warning that raw prompts are deprecated)."""
    return engine.renderer.render_cmpl([prompt])[0]


def decode(tokenizer, token_ids: list[int]) -> str:
    """Special tokens kept: a token view should show an end-of-turn token, not hide it."""
    return tokenizer.decode(token_ids, skip_special_tokens=False)
