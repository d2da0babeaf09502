"""The language-model stack every LM kind shares: a GGUF file's config and weights (gguf_file), one
readable decoder (decoder), its tokenizer and chat template (text), the loaded bundle (loaded) and
sampling a group (sampling). Model data in, torch modules out; it knows no kind and no page."""
