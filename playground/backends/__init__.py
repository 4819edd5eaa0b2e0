"""Where samples come from: the embedded AsyncLLM, the LLMEngine (sync), or a remote vLLM server.
base.py is the seam every front end talks to; the recorder turns what a backend yields into a Run."""
