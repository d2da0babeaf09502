"""The real model kind (issue 33): SmolLM2-135M-Instruct, read from its GGUF file, as a readable Llama."""
