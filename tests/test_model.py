"""Preparing the default model: once, atomically, and again when the cache is damaged."""

from __future__ import annotations

import shutil

import pytest

from playground.backends import model


def test_preparation_is_idempotent(model_path):
    weights = model.checkpoint_dir() / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert str(model.prepare()) == model_path
    assert weights.stat().st_mtime_ns == before, "a sound checkpoint must not be prepared again"
    assert model.check_checkpoint(model.checkpoint_dir()) == []


@pytest.fixture()
def damaged_cache(tmp_path, monkeypatch, model_path):
    """A copy of the prepared cache (and the kept wheel) in a folder of its own."""
    source = model.cache_dir()
    monkeypatch.setenv(model.CACHE_ENV, str(tmp_path))
    shutil.copytree(source / model.CHECKPOINT_NAME, tmp_path / model.CHECKPOINT_NAME)
    if (source / "downloads").is_dir():
        shutil.copytree(source / "downloads", tmp_path / "downloads")
    return tmp_path / model.CHECKPOINT_NAME


@pytest.mark.slow
def test_truncated_weights_and_a_missing_tokenizer_are_detected_and_prepared_again(damaged_cache):
    weights = damaged_cache / "model.safetensors"
    with weights.open("r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    problems = model.check_checkpoint(damaged_cache)
    assert any("model.safetensors" in p for p in problems), problems
    (damaged_cache / "tokenizer.json").unlink()
    assert any("tokenizer.json is missing" in p for p in model.check_checkpoint(damaged_cache))

    assert model.prepare() == damaged_cache
    assert model.check_checkpoint(damaged_cache) == []
    assert not list(damaged_cache.parent.glob(".prepare-*")), "the work folder must be cleaned up"


def test_an_interrupted_preparation_is_never_loaded(damaged_cache):
    (damaged_cache / model.MANIFEST).unlink()  # what a run killed before its last step leaves
    assert any("did not finish" in p for p in model.check_checkpoint(damaged_cache))
