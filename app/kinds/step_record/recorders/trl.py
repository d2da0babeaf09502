"""GRPO step records (docs/reference/step-record.md) from TRL 1.16's GRPOTrainer: `pip install -e '.[trl]'`.

    trainer = RecordingGRPOTrainer(model=..., args=GRPOConfig(...), reward_funcs=[...],
                                   train_dataset=..., record_steps=[1, 100], record_dir="records")
    # or record_every=50: optimizer steps 50, 100, 150, ... (exactly one of the two)

Nothing here recomputes what TRL computes; the record holds TRL's own tensors. `_compute_loss` is
wrapped to keep the inputs it receives and, for the duration of that call only,
`_get_per_token_logps_and_entropies` to keep the log-probs and entropies it computes.
`_calculate_rewards` is wrapped inside `_generate_and_score_completions` to keep each function's
rewards, the prompts and the completion ids. TRL shuffles a scored generation batch before
splitting it into micro-batches, so every row carries a key (generation, row) through the shuffle:
each micro-batch finds its own rewards and its group (row // num_generations, the rows TRL's
advantages were centred over). At `log()`, after TRL has averaged its metrics, the step's record
is written with the dict Trainer logs. Configurations the record cannot represent are refused
when the trainer is built, rather than written as a wrong record.
"""
from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

try:
    import torch
    import trl
    from trl import GRPOTrainer
except ImportError as exc:  # the app itself never imports this module
    raise ImportError("app.kinds.step_record.recorders.trl records TRL's GRPOTrainer; install TRL 1.16 with "
                      "pip install -e '.[trl]'") from exc

import numpy as np

from app.kinds.step_record.domain.parsing import RecordError
from app.kinds.step_record.recorders.trl_record import build_record, refusals, write_record

if not trl.__version__.startswith("1.16."):  # the wrapped methods are TRL's private ones
    warnings.warn(f"app.kinds.step_record.recorders.trl was written against TRL 1.16; this is TRL "
                  f"{trl.__version__}", stacklevel=2)

ROW_KEY = "_step_record_row"  # (generation, row) of each row, carried through TRL's shuffle and split
DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float64: "float64"}
_MISSING = object()


@contextlib.contextmanager
def _spy(obj: Any, name: str, keep: Callable[[tuple, dict, Any], None]) -> Iterator[None]:
    """For the duration: obj.name is the original, whose arguments and result also go to `keep`."""
    own = obj.__dict__.get(name, _MISSING)
    original = getattr(obj, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        keep(args, kwargs, result)
        return result

    setattr(obj, name, spy)
    try:
        yield
    finally:
        if own is _MISSING:
            delattr(obj, name)  # the class's method again
        else:
            setattr(obj, name, own)


def _numpy(x: torch.Tensor | None, i: int, n: int) -> np.ndarray | None:
    return None if x is None else x[i, :n].detach().float().cpu().numpy()


class StepRecorder:
    """Mixin for GRPOTrainer (TRL 1.16): writes `<record_dir>/step-<N>.grpo-step.json` for each
    optimizer step N (Trainer's global_step, 1 for the first) in `record_steps`, or "all", or, with
    `record_every=K` instead, every K-th step (K, 2K, ...)."""

    # GRPOTrainer's, for the type checker (bare annotations: the mixin sets none of them)
    args: Any
    model: Any
    state: Any
    accelerator: Any
    current_gradient_accumulation_steps: int

    def __init__(self, *args: Any, record_steps: Iterable[int] | str | None = None, record_every: int | None = None,
                 record_dir: str | None = None, **kwargs: Any) -> None:
        if (record_steps is None) == (record_every is None):
            raise ValueError("give exactly one of record_steps (optimizer step numbers, or \"all\") and "
                             "record_every (every N-th optimizer step: N, 2N, ...)")
        if record_every is not None and (isinstance(record_every, bool) or not isinstance(record_every, int)
                                         or record_every < 1):
            raise ValueError(f"record_every: a whole number of optimizer steps >= 1, not {record_every!r}")
        if isinstance(record_steps, str) and record_steps != "all":
            raise ValueError(f"record_steps: optimizer step numbers or \"all\", not {record_steps!r}")
        self.record_every = record_every
        self.record_steps = (None if record_steps is None or isinstance(record_steps, str)  # "all", or record_every
                             else frozenset(int(s) for s in record_steps))
        if self.record_steps is not None and any(s < 1 for s in self.record_steps):
            raise ValueError("record_steps: optimizer steps count from 1")
        self._generation, self._micro_step = 0, 0
        self._generations: dict[int, dict[str, Any]] = {}  # the newest scored batch: TRL buffers only that one
        self._micro: list[dict[str, Any]] = []  # the current step's micro-batches
        self.step_records: dict[int, str] = {}  # step -> path written
        self.step_micro_batches: dict[int, list[list[tuple[int, int]]]] = {}  # (group, completion) per micro
        super().__init__(*args, **kwargs)
        self.record_dir = record_dir or os.path.join(self.args.output_dir, "step-records")
        problems = refusals(self)
        if problems:
            raise ValueError("RecordingGRPOTrainer cannot write a faithful step record for this configuration:\n- "
                             + "\n- ".join(problems))

    def _records(self, step: int, ahead: bool = False) -> bool:
        """Whether optimizer step `step` is recorded; with `ahead`, whether `step` or any later one is."""
        if self.record_every is not None:
            if not ahead:
                return step % self.record_every == 0
            upcoming = -(-step // self.record_every) * self.record_every  # the first wanted step >= step
            max_steps = getattr(getattr(self, "state", None), "max_steps", 0) or 0  # Trainer's, once training began
            return max_steps <= 0 or upcoming <= max_steps
        if self.record_steps is None:
            return True
        return any(s >= step for s in self.record_steps) if ahead else step in self.record_steps

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        # a batch scored now may serve later steps too (num_iterations, steps_per_generation)
        if not (self.model.training and self._records(self.state.global_step + 1, ahead=True)):
            return super()._generate_and_score_completions(inputs)  # type: ignore[misc]
        seen: dict[str, Any] = {}

        def keep(args: tuple, kwargs: dict, rewards: torch.Tensor) -> None:
            _, prompts, _, completion_ids = args  # (inputs, prompts, completions, completion_ids_list)
            seen.update(prompts=list(prompts), completion_ids=[[int(t) for t in ids] for ids in completion_ids],
                        rewards=rewards.detach().float().cpu().numpy())  # gathered: every process's rows

        with _spy(self, "_calculate_rewards", keep):
            output = super()._generate_and_score_completions(inputs)  # type: ignore[misc]
        self._generation += 1
        self._generations = {self._generation: seen}
        n = output["prompt_ids"].size(0)
        output[ROW_KEY] = torch.stack([torch.full((n,), self._generation), torch.arange(n)], dim=1).to(
            output["prompt_ids"].device)
        return output

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        step = self.state.global_step + 1  # Trainer counts the step once its optimizer has stepped
        if not (self.model.training and self._records(step)):
            return super()._compute_loss(model, inputs)  # type: ignore[misc]
        seen: list = []
        with _spy(self, "_get_per_token_logps_and_entropies", lambda args, kwargs, out: seen.append(out)):
            loss = super()._compute_loss(model, inputs)  # type: ignore[misc]
        if ROW_KEY not in inputs or not seen:
            warnings.warn(f"step {step} is not recorded: its batch was scored before recording began", stacklevel=2)
        else:
            self._keep_micro_batch(step, inputs, *seen[0][:2])
        return loss

    def _keep_micro_batch(self, step: int, inputs: dict[str, Any], logps: torch.Tensor,
                          entropies: torch.Tensor | None) -> None:
        if self._micro_step != step:
            self._micro, self._micro_step = [], step  # rows of a step that never logged are dropped
        mask = inputs["completion_mask"] * inputs["tool_mask"] if "tool_mask" in inputs else inputs["completion_mask"]
        advantages = inputs["advantages"]
        # what TRL divides dapo/cispo by (`_compute_loss`): the generation batch's tokens, per accumulation window
        normalizer = (float(inputs["num_items_in_batch"].clamp(min=1.0)) / self.accelerator.num_processes
                      * self.current_gradient_accumulation_steps / self.args.steps_per_generation)
        rows = []
        for i, (gen, row) in enumerate(inputs[ROW_KEY].tolist()):
            scored = self._generations[gen]
            ids = scored["completion_ids"][row]
            n = len(ids)
            rows.append({
                "key": (gen, row), "prompt": scored["prompts"][row], "completion_ids": ids,
                "prompt_ids": inputs["prompt_ids"][i][inputs["prompt_mask"][i].bool()].tolist(),
                "rewards": scored["rewards"][row].tolist(), "mask": mask[i, :n].tolist(),
                # a subclass may give (B, T) advantages; the record holds one per completion
                "advantage": advantages[i].tolist() if advantages.dim() == 1 else advantages[i, :n].tolist(),
                "logprobs": _numpy(logps, i, n), "entropy": _numpy(entropies, i, n),
                "old_logprobs": _numpy(inputs.get("old_per_token_logps"), i, n),
                "ref_logprobs": _numpy(inputs.get("ref_per_token_logps"), i, n),
                "sampling_logprobs": _numpy(inputs.get("sampling_per_token_logps"), i, n),
            })
        self._micro.append({"rows": rows, "normalizer": normalizer, "dtype": DTYPES.get(logps.dtype, "float32")})

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        super().log(logs, start_time)  # type: ignore[misc]
        # `logs` now holds what Trainer logged: TRL's averaged metrics, loss, grad_norm, learning_rate, epoch
        step = self.state.global_step
        if self._micro and self._micro_step == step and "loss" in logs and self.model.training:
            micro, self._micro = self._micro, []
            try:
                record, where = build_record(self, trl.__version__, step, micro, logs)
            except (RecordError, ValueError) as exc:  # never stop a training run for its record
                warnings.warn(f"step {step} is not recorded: {exc}", stacklevel=2)
                return
            self.step_records[step] = write_record(self.record_dir, step, record)
            self.step_micro_batches[step] = [[where[r["key"]] for r in m["rows"]] for m in micro]


class RecordingGRPOTrainer(StepRecorder, GRPOTrainer):
    """TRL's GRPOTrainer, unchanged, that also writes the step records asked for."""
