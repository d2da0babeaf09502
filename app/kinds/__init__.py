"""The walkthrough kinds, one folder each (domain, engine, views, web, templates, static): the toy
per sample, the tiny LM per token, a recorded step. Only app/house.py names them (docs/design.md,
"How to add a kind")."""
