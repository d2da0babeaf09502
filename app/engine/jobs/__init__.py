"""Training runs as durable jobs: the engine's side of app/stores/jobs.

- `tasks.JobTask`: what a kind registers for each kind of run (how to run it, which result
  types its codec may rebuild, how it reads as JSON).
- `codec`: results to bytes and back, exactly (tensors bit for bit), without pickle's code execution.
- `runner.JobRunner`: claims one job at a time, renews its lease while it runs, writes progress.
- `client.JobClient`: what the web process (and any view) asks: submit, status, result.
"""
