"""The policy's AdamW groups as transformers' Trainer builds them: weight decay on every weight but the norms'
gains and the biases (a Qwen2 file's q/k/v biases)."""
from __future__ import annotations

from dataclasses import replace

from app.engine.lm.decoder import Decoder
from app.kinds.smollm.engine.optimiser import adamw
from app.kinds.smollm.engine.params import SmolParams


def test_norms_and_biases_are_not_decayed():
    policy = Decoder(replace(Decoder.small(0).cfg, qkv_bias=True))
    decayed, kept = adamw(policy, SmolParams(weight_decay=0.1)).param_groups
    names = {id(p): n for n, p in policy.named_parameters()}
    assert decayed["weight_decay"] == 0.1 and kept["weight_decay"] == 0.0
    kept_names = {names[id(p)] for p in kept["params"]}
    assert kept_names and all(n.endswith(".bias") or "norm" in n for n in kept_names)
    assert {n for n in names.values() if n.endswith(".bias")} <= kept_names
    assert all(n.endswith(".weight") and "norm" not in n for n in (names[id(p)] for p in decayed["params"]))
