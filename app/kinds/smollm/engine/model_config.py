"""The real model's shape without its file."""
from __future__ import annotations

from app.engine.lm.decoder import DecoderConfig

# SmolLM2-135M-Instruct's configuration as its GGUF's metadata states it (gguf_file.config_from_gguf
# reads the same values; a slower-tier test holds them equal): what the graph is traced on without the file.
SMOLLM2_135M = DecoderConfig(vocab_size=49152, n_layer=30, n_embd=576, n_head=9, n_kv_head=3, ffn_dim=1536,
                           rope_theta=100000.0, rms_eps=9.999999747378752e-06, context_length=8192,
                           tie_embeddings=True)
