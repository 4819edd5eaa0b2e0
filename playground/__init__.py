"""vLLM parallel-sampling playground: fan one request out into n seeded samples and see why they differ."""

__version__ = "0.1.0"
