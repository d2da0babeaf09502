"""Engine layer: torch only. The ToyGRPO model, its parameters, recorded runs and the training paths.

Imports `app.domain`, never `app.views` or `app.web`. Entry points: `grpo_step.run_grpo_step`
(the walkthrough's step), `processes.run_process` + `stage_step.stage_step` (the training
paths) and `select.step_for_view`, which picks between them for a view.
"""
