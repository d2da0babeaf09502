"""One live GRPO step of the real checkpoint (SmolLM2-135M-Instruct), G = 8 x 48 new tokens on the CPU: the
slower tier (`make test-slower`). It prints the wall time per stage, the peak RSS, the rewards and the 30
blocks' gradient norms; it asserts structure and finiteness, never timing."""
from __future__ import annotations

import math

import pytest

from app.kinds.smollm.engine import checkpoint
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.engine.step import run_smol_step

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier]

GGUF = checkpoint.installed_gguf()


@pytest.fixture(autouse=True)
def _the_installed_checkpoint(monkeypatch):
    monkeypatch.delenv(checkpoint.GGUF_ENV, raising=False)  # conftest points the suite at a tiny GGUF


def test_one_real_step(tmp_path_factory):
    # make test / test-slower install the checkpoint (Makefile .checkpoint-stamp): missing is a broken install
    assert GGUF is not None, f"no SmolLM2 GGUF file: {checkpoint.INSTALL_HINT}"
    loaded = checkpoint.load(tmp_path_factory.mktemp("smollm-data"))
    stages: list[str] = []
    result = run_smol_step(SmolParams(prompt=0, group_size=8, max_new_tokens=48, seed=0), loaded,
                           progress=lambda stage, done, total: stages.append(f"{stage} {done}/{total}"))
    print(f"\nstage seconds: {result.stage_seconds} (total {sum(result.stage_seconds.values()):.1f} s)")
    print(f"RSS before {result.rss_before_mb:.0f} MB, peak {result.peak_rss_mb:.0f} MB")
    print(f"rewards: {result.rewards}")
    print("completions:", [c.text[:60] for c in result.completions])
    print(f"loss {result.loss:.6g} = surrogate {result.loss_surrogate:.6g} + KL {result.loss_kl:.6g}")
    print(f"‖∂loss/∂θ‖ {result.grad_norm_before_clip:.4g}, clipped to {result.grad_norm_after_clip:.4g}")
    print("block grad norms:", [f"{g:.3g}" for g in result.block_grad_norms])
    print("moved most:", [(m.token, round(m.delta, 4)) for m in result.moved[:5]])
    print(f"{len(result.head)} head nodes, {len(result.wide)} block-level nodes")

    assert result.group_size == 8 and len(result.block_grad_norms) == 30
    assert all(math.isfinite(g) and g > 0 for g in result.block_grad_norms)
    assert math.isfinite(result.loss) and abs(result.loss_surrogate + result.loss_kl - result.loss) < 1e-5
    assert all(0 < c.length <= 48 for c in result.completions)
    tokens = [t for c in result.completions for t in c.tokens]
    assert all(math.isfinite(t.logp) and math.isfinite(t.grad) and math.isfinite(t.logp_after) for t in tokens)
    assert all(t.ratio == 1.0 and not t.clip_active for t in tokens)  # μ = 1, TRL's default: π = π_old
    assert result.logprob_temperature == 0.8 and result.earlier_grad_norms == ()
    assert result.grad_norm_after_clip <= 1.0 * (1 + 1e-6)  # max_grad_norm 1, TRL's default
    assert len(result.attention) == 8 and len(result.attention[0]) == 9  # block 12's 9 heads
    assert len(result.moved) == 10
    assert {"policy.blocks.29.mlp.down", "softmax@policy.blocks.12.attention#0"} <= set(result.wide)
    assert all(math.isfinite(v) for node in result.wide.values() for row in node.value_norm for v in row)
    assert stages[0].startswith("sampling") and not any(s.startswith("inner step") for s in stages)
    assert stages[-1] == "update 1/1"
