"""What a parallel request is, written once (its settings and their checks are in
``playground/request.py``): prompt rendering, the fan-out plan (child ids and seeds), the
aggregation by output_kind, and the two samplers (over AsyncLLM and over LLMEngine). No Gradio
and no HTTP here; ``plan`` needs no vLLM."""
