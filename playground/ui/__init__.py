"""The Gradio app. ``build_app(backend)`` returns the Blocks; ``launch_app`` serves it."""

from playground.ui.app import build_app, launch_app

__all__ = ["build_app", "launch_app"]
