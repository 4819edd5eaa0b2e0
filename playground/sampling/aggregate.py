"""Folding the children's outputs back into parent outputs, by output_kind, as vLLM does.

One class, used by both samplers (AsyncLLM and LLMEngine), so both keep vLLM's n > 1 contract
(the rules in its docstring, checked by ``playground/qa/contract.py``) by the same code.
"""

from __future__ import annotations

from vllm import RequestOutput
from vllm.sampling_params import RequestOutputKind


class ParentAggregator:
    """Folds the children's RequestOutputs into parent RequestOutputs, as vLLM does for n > 1.

    The rules, and why:
    - FINAL_ONLY: nothing until the last child finishes, then one output with all n samples in
      index order, because the caller asked for the finished result only.
    - DELTA and CUMULATIVE: outputs of the children that advanced are merged while the consumer
      has not taken them yet. DELTA concatenates pieces of the same index (nothing may be lost);
      CUMULATIVE keeps the newest value per index (it already holds everything before it). This is
      vLLM's own ``RequestOutput.add``, which its per-request output collector uses.
    - ``finished`` is true only once every child has finished, on the parent's last output.
    - A child that already finished is never returned again (an abort after a finish, say).
    - Every output carries the parent's request id, whichever child it came from.
    - An output never changes once yielded: a child's token list is copied as it arrives.
    """

    def __init__(self, parent_id: str, n: int, output_kind: RequestOutputKind):
        self.parent_id = parent_id
        self.n = n
        self.output_kind = output_kind
        self.unfinished = set(range(n))
        self._final: list = [None] * n
        self._pending: RequestOutput | None = None

    @property
    def finished(self) -> bool:
        return not self.unfinished

    def add(self, index: int, output: RequestOutput) -> bool:
        """Take one child's output (its single CompletionOutput) for sample ``index``.

        Returns whether that child has finished (read before ``output.finished`` is overwritten
        with the parent's flag)."""
        if index not in self.unfinished:
            return True
        completion = output.outputs[0]
        completion.index = index
        if self.output_kind != RequestOutputKind.DELTA:
            # the pinned vLLM hands a CUMULATIVE child its live token list, which later tokens keep
            # growing; the parent's outputs must not change once yielded (QA rule no-mutation).
            completion.token_ids = list(completion.token_ids)
        child_finished = completion.finished()
        if child_finished:
            self.unfinished.discard(index)
        output.request_id = self.parent_id
        output.finished = self.finished
        if self.output_kind == RequestOutputKind.FINAL_ONLY:
            self._final[index] = completion
            if self.finished:
                output.outputs = list(self._final)
                self._pending = output
            return child_finished
        if self._pending is None:
            self._pending = output
        else:
            self._pending.add(output, aggregate=self.output_kind == RequestOutputKind.DELTA)
        return child_finished

    def pop(self) -> RequestOutput | None:
        """The merged parent output waiting for the consumer, if any."""
        output, self._pending = self._pending, None
        return output
