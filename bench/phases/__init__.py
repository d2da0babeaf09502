"""One module per measurement phase; run.py calls them in this order:
startup, engine, then http, page_weight and browser against one running app.

Each phase takes the parsed arguments (and a port where it talks to the app) and
writes into two dicts: `figures` (the numbers the table and targets use) and
`details` (raw runs, kept in the JSON for whoever reads it later).
"""
