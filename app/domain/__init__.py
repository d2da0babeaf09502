"""Domain layer: what the app is about, as plain data. No torch, no web framework.

The snapshot format, the catalog of walkthrough files, the upload store, the
training-path spec and the toy task (prompts, choice roles, reward components).
"""
