"""Independent GRPO arithmetic in plain Python floats (IEEE double).

Written from docs/design.md §3 and DeepSeekMath eq. 3-4, without calling any engine
helper, so the engine can be checked against it.
"""
import math


def log_softmax(logits):
    m = max(logits)
    lse = m + math.log(sum(math.exp(v - m) for v in logits))
    return [v - lse for v in logits]


def linear(weight, bias, x):
    return [sum(w * xi for w, xi in zip(row, x, strict=True)) + b for row, b in zip(weight, bias, strict=True)]


def advantages(rewards, eps):
    g = len(rewards)
    mean = sum(rewards) / g
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / g)  # population std
    return [(r - mean) / (std + eps) for r in rewards]


def clipped_surrogate(ratio, adv, clip_eps):
    clipped = min(max(ratio, 1 - clip_eps), 1 + clip_eps)
    return min(ratio * adv, clipped * adv)


def k3(logp, logp_ref):
    d = logp_ref - logp
    return math.exp(d) - d - 1


def grpo_loss(logp, logp_old, logp_ref, rewards, clip_eps, beta, adv_eps):
    """Returns (loss, per-sample dicts)."""
    adv = advantages(rewards, adv_eps)
    rows = []
    for lp, lo, lr, a in zip(logp, logp_old, logp_ref, adv, strict=True):
        ratio = math.exp(lp - lo)
        surrogate = clipped_surrogate(ratio, a, clip_eps)
        div = k3(lp, lr)
        rows.append({"advantage": a, "ratio": ratio, "clipped": surrogate, "divergence": div,
                     "objective": surrogate - beta * div})
    objective = sum(r["objective"] for r in rows) / len(rows)
    return -objective, rows


def policy_loss(weight, bias, x, actions, logp_old, logp_ref, rewards, clip_eps, beta, adv_eps):
    """The loss as a function of the policy's parameters, for finite differences."""
    lps = log_softmax(linear(weight, bias, x))
    return grpo_loss([lps[a] for a in actions], logp_old, logp_ref, rewards, clip_eps, beta, adv_eps)[0]
