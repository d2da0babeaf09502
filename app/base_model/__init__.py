"""`python -m app.base_model`: build the tiny LM's base checkpoint (issue 13). See __main__."""
