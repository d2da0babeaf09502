"""Recorders that run inside a training framework and write GRPO step records (docs/reference/step-record.md).

Optional extras: nothing in the app imports them, so the app never needs the frameworks installed.
"""
