"""Quality checks of parallel sampling: the n > 1 contract as rules (contract.py), and the matrix
that runs one request under every output_kind on every path and judges each cell (matrix.py)."""
