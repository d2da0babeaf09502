"""Independent GRPO arithmetic in plain Python floats (IEEE double) and `math` only.

Written from the papers' formulas (DeepSeekMath eq. 3-4; Schulman's k1/k2/k3 KL estimators;
dual clip of Ye et al. 2020 as verl runs it; DAPO's clip-higher and token-level mean; Dr. GRPO's
centre-only advantages and constant normaliser), without calling any engine helper, so the
engine can be checked against it. Sums use math.fsum (correctly rounded), so this side's own
rounding error is smaller than the engine's.

The conventions are keyword-only arguments whose defaults are the GRPO paper's, so the
original positional calls `grpo_loss(logp, logp_old, logp_ref, rewards, clip_eps, beta, adv_eps)`
and `policy_loss(...)` keep their meaning.
"""
import math


def log_softmax(logits):
    m = max(logits)
    lse = m + math.log(math.fsum(math.exp(v - m) for v in logits))
    return [v - lse for v in logits]


def linear(weight, bias, x):
    return [math.fsum([*(w * xi for w, xi in zip(row, x, strict=True)), b]) for row, b in zip(weight, bias, strict=True)]


def mean(values):
    """The group mean, refined once so that it is exact when all values are equal."""
    n = len(values)
    m = math.fsum(values) / n
    return m + math.fsum(v - m for v in values) / n


def std(values, kind="population"):
    """population: sqrt(Σ(r-m)²/G) (the paper's formula); sample: Bessel's sqrt(Σ(r-m)²/(G-1))."""
    m = mean(values)
    squares = math.fsum((v - m) ** 2 for v in values)
    if kind == "population":
        return math.sqrt(squares / len(values))
    if kind == "sample":
        return math.sqrt(squares / (len(values) - 1))
    raise ValueError(f"unknown std {kind!r}")


def advantages(rewards, eps, *, std_kind="population"):
    """A_i = (r_i - mean r) / (std r + eps); std_kind="none" (Dr. GRPO) only centres."""
    m = mean(rewards)
    centred = [r - m for r in rewards]
    if std_kind == "none":
        return centred
    denominator = std(rewards, std_kind) + eps
    return [c / denominator for c in centred]


def clip(value, low, high):
    return low if value < low else high if value > high else value


def clipped_surrogate(ratio, adv, clip_eps, *, clip_high=None, dual_clip=None):
    """min(ρA, clip(ρ, 1-ε_low, 1+ε_high)A); with dual clip c > 1 and A < 0, max(that, c·A)."""
    high = clip_eps if clip_high is None else clip_high
    value = min(ratio * adv, clip(ratio, 1 - clip_eps, 1 + high) * adv)
    if dual_clip is not None and adv < 0:
        value = max(value, dual_clip * adv)
    return value


def cispo_terms(ratio, adv, logp, cap, frozen=None):
    """CISPO (MiniMax-M1; TRL loss_type="cispo"): value sg(min(ρ, cap))·A·log π. The capped ratio is a
    constant: d value / d ρ = 0, d value / d log π = min(ρ, cap)·A. `frozen` replaces min(ρ, cap) (a
    finite difference must hold the stopped gradient constant). Returns (value, d value / d ratio,
    clip_active (ρ > cap and A > 0, as TRL logs it), dual_clip_hit (never), below (never), above cap)."""
    weight = min(ratio, cap) if frozen is None else frozen
    above = ratio > cap
    return weight * adv * logp, 0.0, above and adv > 0, False, False, above


def surrogate_terms(ratio, adv, clip_eps, clip_high=None, dual_clip=None):
    """(value, d value / d ratio, clip_active, dual_clip_hit, below band, above band)."""
    high = clip_eps if clip_high is None else clip_high
    below, above = ratio < 1 - clip_eps, ratio > 1 + high
    # The band binds when min() picks the constant clipped branch: A > 0 above it, A < 0 below it.
    clip_active = (adv > 0 and above) or (adv < 0 and below)
    value = clipped_surrogate(ratio, adv, clip_eps, clip_high=clip_high)
    slope = 0.0 if clip_active else adv
    dual_hit = dual_clip is not None and adv < 0 and value < dual_clip * adv
    if dual_hit:
        value, slope = dual_clip * adv, 0.0
    return value, slope, clip_active, dual_hit, below, above


def k3(logp, logp_ref):
    d = logp_ref - logp
    return math.exp(d) - d - 1


def kl_estimate(logp, logp_ref, estimator="k3", *, log_ratio_clamp=None, kl_clamp=None):
    """Schulman's estimators of KL(π || π_ref) from one sample, Δ = log π_ref - log π:
    k1 = -Δ, k2 = Δ²/2, k3 = e^Δ - Δ - 1. For k3 only, Δ clamped to ±log_ratio_clamp first, the
    estimate to ±kl_clamp after. Returns (estimate, Δ clamped?, estimate clamped?, Δ before its clamp, estimate
    before its clamp)."""
    if estimator != "k3":  # the clamps guard k3's exp() (verl's low_var_kl); k1 and k2 are never clamped
        log_ratio_clamp = kl_clamp = None
    raw_delta = logp_ref - logp
    delta = raw_delta if log_ratio_clamp is None else clip(raw_delta, -log_ratio_clamp, log_ratio_clamp)
    if estimator == "k1":
        raw = -delta
    elif estimator == "k2":
        raw = delta * delta / 2
    elif estimator == "k3":
        raw = math.exp(delta) - delta - 1
    else:
        raise ValueError(f"unknown estimator {estimator!r}")
    value = raw if kl_clamp is None else clip(raw, -kl_clamp, kl_clamp)
    delta_hit = log_ratio_clamp is not None and abs(raw_delta) > log_ratio_clamp
    value_hit = kl_clamp is not None and abs(raw) > kl_clamp
    return value, delta_hit, value_hit, raw_delta, raw


def aggregation_weights(lengths, mode="sample_mean", max_length=1):
    """What one token of completion i counts for: loss = -Σ_i Σ_t w_i·(L_it - β·KL_it).
    sample_mean 1/(G·|o_i|) (GRPO paper), token_mean 1/Σ|o| (DAPO), token_sum_norm 1/(G·max_length)
    (Dr. GRPO)."""
    g = len(lengths)
    if mode == "sample_mean":
        return [1 / (g * n) for n in lengths]
    if mode == "token_mean":
        total = sum(lengths)
        return [1 / total for _ in lengths]
    if mode == "token_sum_norm":
        return [1 / (g * max_length) for _ in lengths]
    raise ValueError(f"unknown loss_aggregation {mode!r}")


def grpo_loss(logp, logp_old, logp_ref, rewards, clip_eps=0.2, beta=0.04, adv_eps=1e-4, *,
              advantage_std="population", clip_high=None, dual_clip=None, kl_estimator="k3",
              kl_placement="loss", kl_bias_correction=False, log_ratio_clamp=None, kl_clamp=None,
              loss_aggregation="sample_mean", max_length=1, policy_loss="clip", cispo_frozen=None):
    """Returns (loss, per-sample dicts) for one-token completions (where a sequence-level ratio is the
    token's, and no IS correction applies: the toy has no rollout engine). policy_loss="cispo": see
    cispo_terms; `cispo_frozen` the capped ratios to hold constant.

    kl_placement="reward": r'_i = r_i - β·KL(π_old, π_ref) feeds the advantages and the loss has no
    KL term; "loss": the loss has β·KL(π, π_ref), times ρ with kl_bias_correction (TRL).
    """
    if kl_placement not in ("loss", "reward"):
        raise ValueError(f"unknown kl_placement {kl_placement!r}")
    if kl_bias_correction and kl_placement == "reward":
        raise ValueError("kl_bias_correction needs kl_placement=loss")
    kl_of = logp_old if kl_placement == "reward" else logp
    kls = [kl_estimate(lp, lr, kl_estimator, log_ratio_clamp=log_ratio_clamp, kl_clamp=kl_clamp)
           for lp, lr in zip(kl_of, logp_ref, strict=True)]
    if kl_placement == "reward":
        rewards_used = [r - beta * kl[0] for r, kl in zip(rewards, kls, strict=True)]
    else:
        rewards_used = list(rewards)
    adv = advantages(rewards_used, adv_eps, std_kind=advantage_std)
    weights = aggregation_weights([1] * len(rewards), loss_aggregation, max_length)
    rows = []
    frozen = [None] * len(logp) if cispo_frozen is None else cispo_frozen
    for lp, lo, a, r_used, w, kl, fz in zip(logp, logp_old, adv, rewards_used, weights, kls, frozen, strict=True):
        log_ratio = lp - lo
        ratio_clamped = log_ratio_clamp is not None and abs(log_ratio) > log_ratio_clamp
        if ratio_clamped:
            log_ratio = clip(log_ratio, -log_ratio_clamp, log_ratio_clamp)
        ratio = math.exp(log_ratio)
        if policy_loss == "cispo":
            value, slope, clip_active, dual_hit, below, above = cispo_terms(
                ratio, a, lp, clip_eps if clip_high is None else clip_high, fz)
        else:
            value, slope, clip_active, dual_hit, below, above = surrogate_terms(ratio, a, clip_eps, clip_high,
                                                                                dual_clip)
        divergence, delta_hit, kl_hit, raw_delta, raw_kl = kl
        if kl_placement == "reward":
            kl_term, kl_used = 0.0, divergence
        else:
            kl_term = divergence * ratio if kl_bias_correction else divergence
            kl_used = kl_term
        # d(L_i - β·KL term_i)/dρ: the surrogate's slope, and -β·KL when the KL term carries ρ.
        slope_total = slope - (beta * divergence if kl_bias_correction else 0.0)
        rows.append({
            "reward_used": r_used, "advantage": a, "ratio": ratio, "clipped": value,
            "divergence": divergence, "kl_used": kl_used,
            "kl_rho_factor": ratio if kl_bias_correction else None,
            "objective": value - beta * kl_term, "weight": w,
            "clip_active": clip_active, "dual_clip_hit": dual_hit, "ratio_clamped": ratio_clamped,
            "kl_log_ratio_clamped": delta_hit, "kl_clamped": kl_hit,
            "d_objective_d_ratio": slope_total, "kl_unclamped": raw_kl,
            "cispo_weight": min(ratio, clip_eps if clip_high is None else clip_high) if fz is None else fz,
            # Which side of every kink this sample sits on: a finite difference is only valid
            # where none of these changes within its step.
            "branches": (below, above, dual_hit, ratio_clamped, ratio_clamped and lp > lo,
                         delta_hit, delta_hit and raw_delta > 0, kl_hit, kl_hit and raw_kl > 0),
        })
    loss = -math.fsum(r["weight"] * r["objective"] for r in rows)
    return loss, rows


def ratio_grads(rows):
    """d loss / d ρ_i = -w_i·d(L_i - β·KL term_i)/dρ_i."""
    return [-r["weight"] * r["d_objective_d_ratio"] for r in rows]


def policy_rows(weight, bias, x, actions, logp_old, logp_ref, rewards, clip_eps=0.2, beta=0.04, adv_eps=1e-4,
                **conventions):
    """(loss, rows) as a function of the policy's parameters."""
    lps = log_softmax(linear(weight, bias, x))
    return grpo_loss([lps[a] for a in actions], logp_old, logp_ref, rewards, clip_eps, beta, adv_eps,
                     **conventions)


def policy_loss(weight, bias, x, actions, logp_old, logp_ref, rewards, clip_eps=0.2, beta=0.04, adv_eps=1e-4,
                **conventions):
    """The loss as a function of the policy's parameters, for finite differences."""
    return policy_rows(weight, bias, x, actions, logp_old, logp_ref, rewards, clip_eps, beta, adv_eps,
                       **conventions)[0]


def conventions_kwargs(conventions):
    """The keyword arguments of grpo_loss for a mapping of the engine's convention field names
    (a plain dict: preset, advantage_std, advantage_epsilon, clip_epsilon, ...)."""
    c = dict(conventions)
    return {
        "clip_eps": c["clip_epsilon"], "beta": c["beta"], "adv_eps": c["advantage_epsilon"],
        "advantage_std": c["advantage_std"], "clip_high": c["clip_epsilon_high"], "dual_clip": c["dual_clip"],
        "kl_estimator": c["kl_estimator"], "kl_placement": c["kl_placement"],
        "kl_bias_correction": c["kl_bias_correction"], "log_ratio_clamp": c["log_ratio_clamp"],
        "kl_clamp": c["kl_clamp"], "loss_aggregation": c["loss_aggregation"], "max_length": c["max_length"],
        "policy_loss": c.get("policy_loss", "clip"),
    }


def is_weight(diffs, mode, clip_min, clip_max):
    """TRL's vLLM IS correction of one completion from its tokens' log π_old − log π_sampling: one weight
    per token (token_*) or exp of their sum (sequence_*), truncated to [clip_min, clip_max] or 0 outside."""
    ratios = [math.exp(math.fsum(diffs))] * len(diffs) if mode.startswith("sequence") else [math.exp(d) for d in diffs]
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    if mode.endswith("truncate"):
        return [clip(w, low, high) for w in ratios]
    return [0.0 if (w < low or w > high) else w for w in ratios]


def token_loss(rows, rewards, c, *, sampling=None, advantages_given=None, cispo_frozen=None):
    """The token-level loss (issue 13): rows[i] = [(log π, log π_old, log π_ref) per token of
    completion i], rewards[i], c a dict of every convention. -Σ_i Σ_t w_i (L_it·v_it − β K_it).

    importance_sampling_level=sequence (GSPO): ρ_i = exp(mean_t (log π − log π_old)), on every token of
    completion i. policy_loss=cispo: L_it = sg(min(ρ, ε_high))·A_i·log π_it (`cispo_frozen[i][t]`
    replaces min(ρ, ε_high), for finite differences). v_it: the IS correction's weight from
    `sampling[i][t]` = log π_sampling (1 without a correction or without sampling log-probs).
    `advantages_given`: the A_i to use instead of the rewards'."""
    kl_bound, ratio_bound = c["kl_clamp"], c["log_ratio_clamp"]
    level, policy, mode = (c.get("importance_sampling_level", "token"), c.get("policy_loss", "clip"),
                           c.get("is_correction", "none"))

    def kl(lp, lr):
        return kl_estimate(lp, lr, c["kl_estimator"], log_ratio_clamp=ratio_bound, kl_clamp=kl_bound)[0]

    if c["kl_placement"] == "reward":
        rewards = [r - c["beta"] * sum(kl(lo, lr) for _, lo, lr in row) for r, row in zip(rewards, rows, strict=True)]
    adv = (list(advantages_given) if advantages_given is not None
           else advantages(rewards, c["advantage_epsilon"], std_kind=c["advantage_std"]))
    weights = aggregation_weights([len(r) for r in rows], c["loss_aggregation"], c["max_length"])
    total = []
    for i, (row, a, w) in enumerate(zip(rows, adv, weights, strict=True)):
        if level == "sequence":
            log_ratios = [math.fsum(lp - lo for lp, lo, _ in row) / len(row)] * len(row)
        else:
            log_ratios = [lp - lo for lp, lo, _ in row]
        if mode != "none" and sampling is not None:
            v = is_weight([lo - ls for (_, lo, _), ls in zip(row, sampling[i], strict=True)], mode,
                          c.get("is_clip_min"), c.get("is_clip_max"))
        else:
            v = [1.0] * len(row)
        for t, ((lp, _lo, lr), log_ratio) in enumerate(zip(row, log_ratios, strict=True)):
            if ratio_bound is not None:
                log_ratio = clip(log_ratio, -ratio_bound, ratio_bound)
            rho = math.exp(log_ratio)
            if policy == "cispo":
                value = cispo_terms(rho, a, lp, c["clip_epsilon_high"],
                                    None if cispo_frozen is None else cispo_frozen[i][t])[0]
            else:
                value = surrogate_terms(rho, a, c["clip_epsilon"], c["clip_epsilon_high"], c["dual_clip"])[0]
            k = 0.0 if c["kl_placement"] == "reward" else kl(lp, lr) * (rho if c["kl_bias_correction"] else 1.0)
            total.append(w * (value * v[t] - c["beta"] * k))
    return -math.fsum(total)


def kl_slope(logp, logp_ref, estimator="k3", *, log_ratio_clamp=None, kl_clamp=None):
    """d KL estimate / d log π, by hand (Δ = log π_ref − log π, dΔ/d log π = −1): k1 = −Δ gives 1,
    k2 = Δ²/2 gives −Δ, k3 = e^Δ − Δ − 1 gives 1 − e^Δ; 0 where a clamp (k3's only) binds."""
    value, delta_hit, value_hit, raw_delta, _ = kl_estimate(logp, logp_ref, estimator, log_ratio_clamp=log_ratio_clamp,
                                                            kl_clamp=kl_clamp)
    if delta_hit or value_hit:
        return 0.0
    if estimator == "k1":
        return 1.0
    if estimator == "k2":
        return -raw_delta
    return 1 - math.exp(raw_delta)


def token_gradient_parts(rows, rewards, c, *, sampling=None, advantages_given=None, weights=None):
    """∂loss/∂log π_it of token_loss, split by hand into (surrogate part, KL part), each [i][t]:

    surrogate part = −w_i·v_it·∂L_it/∂log π,  KL part = w_i·β·∂K_it/∂log π  (their sum: the whole).

    ∂ρ/∂log π: ρ at token level, ρ_i/|o_i| on every token of completion i at sequence level (GSPO: ρ_i is
    shared, so token s's part gathers every token t's ∂/∂ρ_i), 0 where the log-ratio clamp binds. clip:
    ∂L/∂ρ = A, or 0 where the clip or the dual clip binds; cispo: ∂L/∂log π = min(ρ, ε_high)·A, no ρ path.
    K = KL (∂ = kl_slope), or KL·ρ with kl_bias_correction (∂ = kl_slope·ρ + KL·∂ρ); 0 with the KL in the
    reward. `weights`: per completion w_i in place of the aggregation's (a record's global token count)."""
    ratio_bound, beta = c["log_ratio_clamp"], c["beta"]
    level, policy, mode = (c.get("importance_sampling_level", "token"), c.get("policy_loss", "clip"),
                           c.get("is_correction", "none"))
    if c["kl_placement"] == "reward":
        rewards = [r - beta * sum(kl_estimate(lo, lr, c["kl_estimator"], log_ratio_clamp=ratio_bound,
                                              kl_clamp=c["kl_clamp"])[0] for _, lo, lr in row)
                   for r, row in zip(rewards, rows, strict=True)]
    adv = (list(advantages_given) if advantages_given is not None
           else advantages(rewards, c["advantage_epsilon"], std_kind=c["advantage_std"]))
    if weights is None:
        weights = aggregation_weights([len(r) for r in rows], c["loss_aggregation"], c["max_length"])
    surrogate_parts, kl_parts = [], []
    for i, (row, a, w) in enumerate(zip(rows, adv, weights, strict=True)):
        n = len(row)
        raw = ([math.fsum(lp - lo for lp, lo, _ in row) / n] * n if level == "sequence"
               else [lp - lo for lp, lo, _ in row])
        hit = [ratio_bound is not None and abs(x) > ratio_bound for x in raw]
        rho = [math.exp(x if not h else clip(x, -ratio_bound, ratio_bound)) for x, h in zip(raw, hit, strict=True)]
        # d ρ_t / d log π_s: own token only at token level; every token of the completion at sequence level
        def d_rho(t, s, rho=rho, hit=hit, n=n):
            if hit[t]:
                return 0.0
            if level == "sequence":
                return rho[t] / n
            return rho[t] if t == s else 0.0
        if mode != "none" and sampling is not None:
            v = is_weight([lo - ls for (_, lo, _), ls in zip(row, sampling[i], strict=True)], mode,
                          c.get("is_clip_min"), c.get("is_clip_max"))
        else:
            v = [1.0] * n
        kls = [kl_estimate(lp, lr, c["kl_estimator"], log_ratio_clamp=ratio_bound, kl_clamp=c["kl_clamp"])[0]
               for lp, _, lr in row]
        slopes = [kl_slope(lp, lr, c["kl_estimator"], log_ratio_clamp=ratio_bound, kl_clamp=c["kl_clamp"])
                  for lp, _, lr in row]
        sur_row, kl_row = [], []
        for s in range(n):
            if policy == "cispo":
                d_l = v[s] * min(rho[s], c["clip_epsilon_high"]) * a
            else:
                d_l = math.fsum(v[t] * surrogate_terms(rho[t], a, c["clip_epsilon"], c["clip_epsilon_high"],
                                                       c["dual_clip"])[1] * d_rho(t, s) for t in range(n))
            if c["kl_placement"] == "reward":
                d_k = 0.0
            elif c["kl_bias_correction"]:
                d_k = slopes[s] * rho[s] + math.fsum(kls[t] * d_rho(t, s) for t in range(n))
            else:
                d_k = slopes[s]
            sur_row.append(-w * d_l)
            kl_row.append(w * beta * d_k)
        surrogate_parts.append(sur_row)
        kl_parts.append(kl_row)
    return surrogate_parts, kl_parts
