"""The machine's limit: the model's decode-step matrix multiplications at n, and nothing else.

A decode step of a dense decoder multiplies n rows (one per sample) by every weight matrix of
the model: per layer the fused q/k/v projection, the output projection, the fused gate/up
projection and the down projection, then the logits projection. ``MachineLimit`` times exactly
those products, with weights of the model's shapes and dtype, through the kernels vLLM itself
dispatches to on this CPU (oneDNN or its small-GEMM kernels, ``dispatch_cpu_unquantized_gemm``),
on as many threads and the same cores as the engine computes with. ``n`` samples x steps / time
is then the most tokens per second the engine could make here if attention, sampling,
scheduling and everything else cost nothing; ``native/limit`` says how close it gets.

The weights are random (speed does not depend on the values) and one set per layer, as in the
model, so at small n, where the step is bound by reading the weights from memory, the limit is
bound by it too. Only dense decoders with the usual Hugging Face config fields are covered; for
other models the limit is not measured (NaN).
"""

from __future__ import annotations

import gc
import time
from typing import Any

from playground.bench.measure import Arrivals
from playground.bench.probes import engine_threads


def decode_shapes(config: Any) -> tuple[list[tuple[int, int]], int, tuple[int, int]]:
    """((in, out) of each matmul of one layer, layers, (in, out) of the logits projection)."""
    hidden, heads = config.hidden_size, config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    layer = [(hidden, (heads + 2 * kv_heads) * head_dim),  # q, k and v, fused as vLLM does
             (heads * head_dim, hidden),  # attention output
             (hidden, 2 * config.intermediate_size),  # gate and up, fused
             (config.intermediate_size, hidden)]  # down
    return layer, config.num_hidden_layers, (hidden, config.vocab_size)


class MachineLimit:
    """Times decode steps of bare matmuls; called like a path: ``limit(n, max_tokens) -> Arrivals``."""

    def __init__(self, config: Any, dtype: str, threads: int, pin: list[int] | None = None):
        import torch

        self.dtype, self.threads, self.pin = dtype, threads, pin
        self.layer_shapes, layers, self.head_shape = decode_shapes(config)
        with engine_threads(threads, pin):  # oneDNN may size its kernels to the threads
            self.layers = [[self._linear(i, o) for i, o in self.layer_shapes] for _ in range(layers)]
            self.head = self._linear(*self.head_shape)
        self._torch = torch

    def _linear(self, fan_in: int, fan_out: int):
        """An nn.Linear whose forward is the kernel vLLM picks for this shape and dtype."""
        import torch
        from vllm.platforms import current_platform

        linear = torch.nn.Linear(fan_in, fan_out, bias=False, dtype=getattr(torch, self.dtype))
        with torch.no_grad():
            linear.weight.normal_(0, 0.02)
        if current_platform.is_cpu():
            from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

            dispatch_cpu_unquantized_gemm(linear, remove_weight=False)
            return lambda x: linear.cpu_linear(x, linear.weight, None)
        return linear

    def __call__(self, n: int, max_tokens: int) -> Arrivals:
        torch = self._torch
        dtype = getattr(torch, self.dtype)
        rows = {fan_in: torch.randn(n, fan_in, dtype=dtype) for fan_in, _ in [*self.layer_shapes, self.head_shape]}
        times: list[float] = []
        with engine_threads(self.threads, self.pin), torch.inference_mode():
            start = time.monotonic()
            for _ in range(max_tokens):
                for layer in self.layers:
                    for (fan_in, _), linear in zip(self.layer_shapes, layer, strict=True):
                        linear(rows[fan_in])
                self.head(rows[self.head_shape[0]])
                times.append(time.monotonic() - start)
            wall = time.monotonic() - start
        return Arrivals([list(times) for _ in range(n)], wall)

    def close(self) -> None:
        self.layers, self.head = [], None
        gc.collect()
