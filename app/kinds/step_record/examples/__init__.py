"""Example records a first visitor can open from the upload page ("Try an example"), read through
the same Reader and upload store as an upload (web/examples.py): nothing here is loaded at start.

- trl: step 2 of a real TRL 1.16.0 GRPOTrainer run on CPU, written by the TRL recorder
  (recorders/trl.py) in peers/test_trl_recorder.py (the same bytes as tests/fixtures/
  trl_step_record.grpo-step.json; `UPDATE_TRL_FIXTURE=1 make peers` rewrites that one).
- unipo: a GRPO step in UNIPO's canonical JSON, written by tests/fixtures/make_unipo_fixture.py (made-up
  log-probs, every number float64; its advantages use no ε, which the reader does not know: the
  group step shows the ≠ and the switch).
- verl: a verl 0.9.1 DataProto (verl's own GRPO advantages, a masked tool-output token, vanilla loss with
  token-mean and low_var_kl, the metrics verl's loss functions logged) written by the verl recorder
  (recorders/verl.py) in peers/test_verl_example.py, which checks the shipped bytes are what it writes now
  (`UPDATE_VERL_EXAMPLE=1 make peers` rewrites them). Its token ids and log-probs are made up: a verl
  training run needs Ray and a rollout engine, which this repository does not run.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Example:
    name: str  # the URL's segment
    title: str
    sentence: str
    file: str

    @property
    def path(self) -> Path:
        return HERE / self.file


EXAMPLES = (
    Example("trl", "TRL 1.16", "A real run: step 2 of a CPU GRPOTrainer run (loss_type dapo, β 0.1, two passes over "
            "the batch, so some ratios clip): 2 groups of 4 completions.", "trl-1.16-step-2.grpo-step.json"),
    Example("verl", "verl 0.9.1", "verl's own batch format and GRPO advantages (vanilla clip with the dual clip, "
            "token-mean, a low_var_kl term, β 0.1): 2 prompts × 4 responses, one tool-output token masked; "
            "the log-probs are made up, not from a training run.", "verl-0.9.1-step-7.grpo-step.json"),
    Example("unipo", "UNIPO", "A GRPO step as UNIPO's visualiser stores it: 2 prompts × 4 responses of "
            "5–23 tokens, with a KL to the reference.", "unipo-grpo-step-7.json"),
)
BY_NAME = {e.name: e for e in EXAMPLES}
