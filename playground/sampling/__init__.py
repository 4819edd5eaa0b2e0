"""What a parallel request is, written once: the request and its checks, prompt rendering, the
fan-out plan (child ids and seeds), the aggregation by output_kind, and the two samplers (over
AsyncLLM and over LLMEngine). No Gradio and no HTTP here; ``plan`` and ``request`` need no vLLM."""
