"""Domain layer: what the app is about, as plain data. No torch, no web framework.

The snapshot format, the catalog of walkthrough files, the upload and job stores, and the
training paths' ids (R1-Zero, R1, distillation). A kind's own data lives in its folder.
"""
