"""The Gradio app. ``build_app(backend)`` returns the Blocks; ``app.py`` launches it."""

from playground.ui.app import build_app

__all__ = ["build_app"]
