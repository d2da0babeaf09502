"""Whole training runs: a sibling of the walkthrough kinds (issue 50), with the same layers (domain, engine,
views, web) and its own templates, static files, store and routes; its manifest is manifest.py.

A run is many steps: a framework's logged metrics (TRL's trainer_state.json, UNIPO's canonical files), its
per-token and per-sample files (prime-rl, slime, verl, TRL's completions) and the step records beside it. The
explorer charts them, compares runs, follows a folder as it grows and diffs two recorded steps. A run reads
records through the step-record kind (app/kinds/step_record) and links each recorded step to that kind's
page; so it sits above the kinds and below the house, and no kind imports it (pyproject's import contracts)."""
