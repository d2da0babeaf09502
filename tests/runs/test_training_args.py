"""training_args.bin read as plain fields (domain/training_args.py): a real torch.save of a dataclass shaped like TRL's
GRPOConfig (enum fields as TrainingArguments has them, a nested dict, a set, a torch dtype), in the zip format
torch ≥ 1.6 writes and the legacy one; and pickles made to run something, which run nothing."""
from __future__ import annotations

import enum
import io
import os
import pickle
import zipfile
from dataclasses import dataclass, field

import pytest
import torch

from app.runs.domain.training_args import TrainingArgsRefused, read_training_args


class IntervalStrategy(str, enum.Enum):  # noqa: UP042  transformers' ExplicitEnum is (str, Enum), as here
    NO = "no"
    STEPS = "steps"


class SchedulerType(enum.Enum):
    LINEAR = "linear"
    COSINE = "cosine"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class FakeGRPOConfig:
    output_dir: str = "out"
    beta: float = 0.04
    epsilon: float = 0.2
    epsilon_high: float | None = None
    loss_type: str = "dapo"
    num_generations: int = 8
    logging_strategy: IntervalStrategy = IntervalStrategy.STEPS
    lr_scheduler_type: SchedulerType = SchedulerType.COSINE
    level: Level = Level.HIGH
    reward_weights: list[float] | None = field(default_factory=lambda: [1.0, 0.5])
    accelerator_config: dict = field(default_factory=lambda: {"split_batches": False, "even_batches": True})
    report_to: set = field(default_factory=lambda: {"wandb", "tensorboard"})
    torch_dtype: object = torch.bfloat16
    scale_rewards: bool = True


EXPECTED = {
    "output_dir": "out", "beta": 0.1, "epsilon": 0.28, "epsilon_high": None, "loss_type": "dr_grpo", "num_generations": 8,
    "logging_strategy": "steps", "lr_scheduler_type": "cosine", "level": 2, "reward_weights": [1.0, 0.5],
    "accelerator_config": {"split_batches": False, "even_batches": True}, "report_to": ["tensorboard", "wandb"],
    "torch_dtype": "torch.bfloat16", "scale_rewards": True,
}


def saved(obj, **kwargs) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, **kwargs)
    return buffer.getvalue()


def test_a_torch_save_of_a_grpo_config_reads_as_its_plain_fields():
    raw = saved(FakeGRPOConfig(beta=0.1, epsilon=0.28, loss_type="dr_grpo"))
    assert raw[:2] == b"PK" and any(n.endswith("/data.pkl") for n in zipfile.ZipFile(io.BytesIO(raw)).namelist())
    args = read_training_args(raw)
    assert args.class_name == f"{__name__}.FakeGRPOConfig"
    assert args.fields == EXPECTED


def test_the_legacy_format_reads_the_same():
    args = read_training_args(saved(FakeGRPOConfig(beta=0.1, epsilon=0.28, loss_type="dr_grpo"),
                                    _use_new_zipfile_serialization=False))
    assert args.fields == EXPECTED


def test_a_tensor_in_the_config_is_never_loaded():
    args = read_training_args(saved(FakeGRPOConfig(torch_dtype=torch.zeros(3))))
    assert args.fields["torch_dtype"] == "<a tensor, not loaded>"


class Boom:
    """Pickles as a call of os.system: what a hostile training_args.bin holds."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def _touch(path: str) -> None:  # a harmless-looking callable from an allowed module: still never called
    open(path, "w").close()


class Sneaky:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return _touch, (self.path,)


@pytest.mark.parametrize("wrap", ["bare", "torch"])
def test_a_pickle_that_would_call_os_system_runs_nothing(tmp_path, wrap):
    target = tmp_path / "pwned"
    hostile = Boom(f"touch {target}")
    raw = pickle.dumps(hostile, protocol=2) if wrap == "bare" else saved(FakeGRPOConfig(output_dir=hostile))
    with pytest.raises(TrainingArgsRefused, match=r"names (os|posix)\.system"):
        read_training_args(raw)
    assert not target.exists()
    # hand-written, protocol 0: GLOBAL os system, REDUCE
    with pytest.raises(TrainingArgsRefused):
        read_training_args(f"cos\nsystem\n(S'touch {target}'\ntR.".encode())
    assert not target.exists()


def test_any_other_callable_is_an_inert_placeholder(tmp_path):
    target = tmp_path / "touched"
    args = read_training_args(saved(FakeGRPOConfig(output_dir=Sneaky(str(target)))))
    assert not target.exists()
    assert args.fields["output_dir"] == str(target)  # only its recorded argument, as text


@pytest.mark.parametrize("raw", [b"", b"not a pickle", b"PK\x03\x04broken", pickle.dumps([1, 2, 3], protocol=2),
                                 pickle.dumps(42, protocol=2)])
def test_what_is_not_a_training_args_file_is_refused_with_words(raw):
    with pytest.raises(TrainingArgsRefused):
        read_training_args(raw)


def test_builtins_other_than_plain_containers_are_refused(tmp_path):
    raw = b"cbuiltins\neval\n(S'1+1'\ntR."
    with pytest.raises(TrainingArgsRefused, match=r"builtins\.eval"):
        read_training_args(raw)
