"""The remote backend: a vLLM server driven over its OpenAI-compatible API (see backend.py)."""

from playground.backends.remote.backend import RemoteBackend

__all__ = ["RemoteBackend"]
