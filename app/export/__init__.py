"""The project's own exporter: a torch nn.Module -> a `tensorviz.graph` version 3 walkthrough.

`python -m app.export --model NAME --steps STEPS.json --out x.tensorviz.json` (NAME: a kind's export target)

`trace` runs the model once and records its nodes and data flows, `graph` turns them into the
format's nodes and two-level edges, `layout` places them and frames each step, `steps` reads
the authored steps file, `document` assembles and checks the file with the app's own loader.
It builds on `app.engine` (the models) and `app.domain` (the loader), never on the web or views.
Nothing is imported here, so `python -m app.export --help` answers without loading torch.
"""
