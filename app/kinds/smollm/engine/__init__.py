"""The real model's engine: the installed checkpoint (checkpoint.py), its tasks' prompts, the GRPO objective
over three scorers of the shared decoder (smollm_grpo.py), the live step and the R1-Zero run. The model itself,
its GGUF loader, tokenizer and sampling are the shared LM stack's (app/engine/lm)."""
