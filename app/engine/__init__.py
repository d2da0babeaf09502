"""Torch side of the app: the ToyGRPO model, its parameters and recorded runs.

Knows nothing of the web layer.
"""
from .device import DeviceUnavailable, resolve_device
from .params import GRPOParams
from .prompts import TOY_PROMPTS
from .run import RUNNABLE_NODE_IDS, NodeRecord, StepResult, TrainingDiverged, run_grpo_step

__all__ = ["DeviceUnavailable", "GRPOParams", "NodeRecord", "RUNNABLE_NODE_IDS", "StepResult",
           "TOY_PROMPTS", "TrainingDiverged", "resolve_device", "run_grpo_step"]
