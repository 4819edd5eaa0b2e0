"""Sentence embeddings of the samples, for grouping them by meaning (playground.analysis.meaning).

Any sentence-transformers model works, by Hugging Face id or local folder; a plain transformers
encoder works too (sentence-transformers then mean-pools its token states). Off unless a person
names a model, and offline unless they allow downloads: the default setup has no network, and a
playground that reaches out to a hub on its own would surprise. The model runs on the CPU, in
this process, loaded once per (model, offline) and kept.

Computing embeddings needs torch, which the analysis layer must not import; the clustering and
its entropy are pure numpy over the matrix this returns.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from playground.errors import PlaygroundError

BATCH_SIZE = 32


class EmbeddingModelError(PlaygroundError, RuntimeError):
    """The embedding model could not be loaded or run; ``downloadable``: a download might help (a
    hub id not in the cache), not a folder that is not there."""

    def __init__(self, message: str, downloadable: bool = True):
        super().__init__(message)
        self.downloadable = downloadable


class Embedder:
    """One loaded sentence-embedding model: texts in, one row per text out."""

    def __init__(self, model: str, offline: bool = True):
        self.model_name = model
        if model.startswith(("/", ".", "~")) and not Path(model).expanduser().exists():  # a folder, not a hub id
            raise EmbeddingModelError(f"the embedding model folder {model} does not exist", downloadable=False)
        from sentence_transformers import SentenceTransformer

        try:
            self.model = SentenceTransformer(model, device="cpu", local_files_only=offline)
        except Exception as e:  # OSError, ValueError, hub errors: all mean "cannot use this model"
            where = ("It is not a local folder or in the Hugging Face cache, and downloads are off: give a local "
                     "folder, or allow downloading. " if offline else "")
            raise EmbeddingModelError(f"the embedding model {model!r} could not be loaded. {where}"
                                      f"({type(e).__name__}: {_first_line(e)})") from None
        self._lock = threading.Lock()  # one encode at a time: the model is shared by every caller

    def embed(self, texts: list[str]) -> np.ndarray:
        """A float32 matrix, one row per text (an empty text has an embedding too)."""
        if not texts:
            return np.zeros((0, self.model.get_sentence_embedding_dimension() or 1), dtype=np.float32)
        try:
            with self._lock:
                vectors = self.model.encode(list(texts), batch_size=BATCH_SIZE, convert_to_numpy=True,
                                            show_progress_bar=False)
        except Exception as e:
            raise EmbeddingModelError(f"the embedding model {self.model_name!r} failed on the samples "
                                      f"({type(e).__name__}: {_first_line(e)})") from None
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


@lru_cache(maxsize=2)
def load_embedder(model: str, offline: bool = True) -> Embedder:
    """The model, loaded on first use and kept (a load costs seconds; a run's samples, milliseconds)."""
    if not model or not model.strip():
        raise EmbeddingModelError("name an embedding model: a Hugging Face id or a local folder")
    return Embedder(model.strip(), offline)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "no message"
