"""The QA matrix: one request under every output_kind × every path, each cell checked against the
contract (../shared/notes/vllm-parallel-sampling.md), then the cells' tokens compared.

A tester used to run CUMULATIVE, DELTA and FINAL_ONLY one at a time and compare by eye; this runs
all of them through our fan-out ("wrapper") and vLLM's own ParentRequest ("native") on the async
front end (AsyncLLM), the sync front end (LLMEngine) and, when asked, a vLLM server, and states a
verdict per cell.

The cells run one at a time, so each runs alone on its engine unless someone else is using it;
every cell records how many requests were in flight on its engine when it started and when it
ended, so a divergence between two cells can say whether their batches differed. Seeded results
depend on the batch (floating-point order), so a divergence is reported, with its first token,
but it is not a contract failure.

"Final" is re-derived here, not taken from the run recorder: a DELTA cell's concatenated pieces
and a CUMULATIVE cell's last values must equal the same path's FINAL_ONLY cell, when both ran
alone on the engine (otherwise their batches differed and that comparison is skipped, with a note).

Besides the output kinds' contract, every cell is held to the path's conduct: no output it yielded
changes afterwards (no-mutation), every output carries the parent's id (parent-id), and the engine
counts the parent's children and is back to 0 after the run ends and after a stopped run
(accounting). A rule a path cannot show (a remote server's objects) is listed as not checked.

The parts: paths.py (how a request is run), running.py (the cells, one at a time, and their
verdicts), cells.py (the matrix as data: table, report, JSON), compare.py (divergence between
cells); the rules are in contract.py and conduct.py. This module is their one front door.
"""

from playground.qa.cells import BAD_MARK, MATRIX_VERSION, OK_MARK, ONE_AT_A_TIME, Cell, Comparison, Matrix
from playground.qa.compare import batch_note, compare
from playground.qa.contract import RULES
from playground.qa.sampling_paths import SamplingPath, backend_paths, sync_paths
from playground.qa.running import OnCell, run_matrix
from playground.sampling.request import OUTPUT_KINDS

__all__ = [
    "BAD_MARK", "MATRIX_VERSION", "OK_MARK", "ONE_AT_A_TIME", "OUTPUT_KINDS", "RULES", "Cell", "Comparison", "Matrix",
    "OnCell", "SamplingPath", "backend_paths", "batch_note", "compare", "run_matrix", "sync_paths",
]
