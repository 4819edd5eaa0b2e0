"""Quality checks of parallel sampling: rules written one function each (rules.py: the registry;
contract.py: vLLM's n > 1 output-kind contract; conduct.py: what a path hands out, under which id,
what the engine counts), and the matrix that runs one request under every output_kind on every path
and judges each cell (matrix.py, the front door; sampling_paths.py: the paths; cells.py: the matrix
as data)."""
