"""Where the app keeps bytes and rows, on SQLite (one machine) or PostgreSQL (replicas and workers on
other machines): uploads (uploads/) and training jobs (jobs/). Adapters only: plain data in and out,
no torch, no web, no kind. The lowest layer: the domain and the engine build on it."""
