"""The embedded backend: ParallelSampler over an AsyncLLM that runs in this process."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from vllm import TokensPrompt
from vllm.v1.engine.exceptions import EngineDeadError

from playground import fanout
from playground.backend import Prepared
from playground.engine import EngineHost, describe_engine
from playground.errors import EngineUnavailable
from playground.request import Limits
from playground.run import Observation, metrics_snapshot, observation_from_output
from playground.sampler import ParallelSampler


class EmbeddedBackend:
    def __init__(self, host: EngineHost, max_n: int = 32):
        self.host = host
        self.max_n = max_n
        self._describe()

    def _describe(self) -> None:
        engine = self.host.engine
        self._info = describe_engine(engine)
        self.limits = Limits(
            max_n=self.max_n,
            max_model_len=self._info["max_model_len"],
            max_logprobs=self._info["max_logprobs"],
        )
        self.tokenizer = engine.tokenizer

    def info(self) -> dict[str, Any]:
        return {**self._info, "up": self.host.engine is not None and not self.host.engine.errored}

    def render_prompt(self, prompt: str, use_chat_template: bool) -> tuple[str, list[int]]:
        """The exact string the model sees, and its token ids."""
        if use_chat_template:
            rendered = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            return rendered, self.tokenizer.encode(rendered, add_special_tokens=False)
        return prompt, self.tokenizer.encode(prompt)

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=False)

    async def stream(self, prepared: Prepared) -> AsyncIterator[Observation]:
        request = prepared.request
        params = fanout.sampling_params(request)
        tokens = TokensPrompt(prompt_token_ids=prepared.prompt_token_ids, prompt=prepared.rendered_prompt)
        # Native FINAL_ONLY builds its one output from the last child to finish, so the output's
        # engine facts cannot be attributed to outputs[0]; the wrapper reports them per child.
        attribute = request.mode == "native" and (request.output_kind != "FINAL_ONLY" or request.n == 1)

        async def produce():
            sampler = ParallelSampler(self.host.engine, self.max_n)
            children: list[Observation] = []

            def on_child(index, output):
                facts = Observation()
                if output.num_cached_tokens is not None:
                    facts.num_cached_tokens[index] = output.num_cached_tokens
                if output.metrics is not None:
                    facts.metrics[index] = metrics_snapshot(output.metrics)
                children.append(facts)

            generator = sampler.generate(tokens, params, prepared.request_id, request.mode, on_child=on_child)
            async for output in generator:
                observation = observation_from_output(output, time.monotonic(), child_facts=attribute)
                while children:
                    yield children.pop(0)
                yield observation

        try:
            async for observation in self.host.stream(produce):
                yield observation
        except EngineDeadError as e:
            raise EngineUnavailable(
                "the vLLM engine core has died; the playground is restarting it, try again in a minute"
            ) from e

    async def num_unfinished(self) -> int:
        async def count():
            return self.host.engine.get_num_unfinished_requests()

        return await self.host.call(count())
