"""Engine layer, shared by every kind: torch only, and no kind's model (each kind's engine is in
its own folder, app/kinds/<kind>/engine).

Imports `app.domain`, never `app.views` or `app.web`. `grpo/`: the GRPO objective's pieces in
every convention (advantages, ratio, clip, KL, aggregation; presets of the paper, TRL, verl, Dr.
GRPO, DAPO); `runtime/`: device and threads, the compute limiter, the tracer that records every
module's values and gradients, training loops; `jobs/`: the client and runner of durable jobs;
`export_target.py`: what a kind offers the exporter.
"""
