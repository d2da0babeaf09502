"""The real model's engine: the Llama module (llama.py), its weights and config from the GGUF file
(gguf_weights.py), its tokenizer and chat template (text.py), and the installed checkpoint (checkpoint.py)."""
