"""UNIPO's canonical JSON (Polo Club, 2026: poloclub/unipo, docs/canonical_schema.json) as a step record.

UNIPO logs a whole run: `header` (algorithm, model_name, free-form `hparams`) and `entries`, one per
model update, each with `metrics` and a few representative `prompts` whose `responses` carry their
`tokens` (ids, strings, log_probs, old_log_probs, ref_log_probs, advantages, token_kl, ...,
`token_objective`). One entry holding prompts becomes one record; what UNIPO does not record
(aggregation, advantage normalisation, estimator, dtype) is taken from UNIPO's own explainer for the
algorithm (src/lib/algorithm-explainer/algorithms/<algorithm>.json) or our defaults, and `run.note`
says which. Every refusal names the field by UNIPO's path, e.g.
`entries[1].prompts[0].responses[2].tokens.log_probs: 5 values, but tokens.ids has 6`.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

import numpy as np

from app.kinds.step_record.domain.arrays import describe
from app.kinds.step_record.domain.record import FORMAT, VERSION, StepRecord
from app.kinds.step_record.domain.unipo_config import config_from_header, infer_estimator, number
from app.kinds.step_record.domain.validation import RecordError, validate_record

FRAMEWORK = "unipo"
REWARD = "reward"  # UNIPO keeps one combined reward per response (header.reward_strategy says how)
# our completion fields by UNIPO's names, to say a refusal of the converted record in UNIPO's terms
FIELDS = {"token_ids": "tokens.ids", "tokens": "tokens.strings", "logprobs": "tokens.log_probs",
          "old_logprobs": "tokens.old_log_probs", "ref_logprobs": "tokens.ref_log_probs",
          "entropy": "tokens.entropy", "advantage": "advantage", "rewards": "reward", "reward": "reward"}


def is_unipo(data: Any) -> bool:
    """A canonical UNIPO file: `header` and `entries` at the top, and never our own `format`."""
    return isinstance(data, dict) and "format" not in data and "header" in data and "entries" in data


class _Reader:
    def __init__(self, data: Any, source: str, step: int | None):
        self.source = source
        self.header = self.need(data.get("header"), dict, "header", "an object")
        self.hparams = self.need(self.header.get("hparams", {}), dict, "header.hparams", "an object")
        entries = self.need(data.get("entries"), list, "entries", "a list")
        blueprint = data.get("blueprint")
        shared = blueprint.get("prompts") if isinstance(blueprint, dict) else None
        found = [i for i, e in enumerate(entries) if isinstance(e, dict) and
                 (step is None or e.get("step") == step) and (e.get("prompts") is not None or shared)]
        if not found:
            what = f"no entry of step {step}" if step is not None else "no entry"
            self.fail("entries", f"{what} holds prompts (nor does a blueprint): nothing to recompute")
        self.index, self.with_prompts = found[0], len(found)
        self.entry = entries[self.index]
        self.where = f"entries[{self.index}]"
        own = self.entry.get("prompts")
        self.prompts_path = f"{self.where}.prompts" if own is not None else "blueprint.prompts"
        prompts = self.need(own if own is not None else shared, list, self.prompts_path, "a list")
        if not prompts:
            self.fail(self.prompts_path, "holds no prompt")
        self.prompts = prompts

    def fail(self, path: str, message: str) -> NoReturn:
        raise RecordError(self.source, path, message)

    def need(self, value: Any, kind: type, path: str, what: str) -> Any:
        if value is None:
            self.fail(path, "missing")
        if not isinstance(value, kind) or isinstance(value, bool):
            self.fail(path, f"must be {what}")
        return value

    def responses(self):
        """(prompt, path, response, tokens, n) of every response, in order: our completion order."""
        for p, prompt in enumerate(self.prompts):
            path = f"{self.prompts_path}[{p}]"
            self.need(prompt, dict, path, "an object")
            for r, response in enumerate(self.need(prompt.get("responses"), list, f"{path}.responses", "a list")):
                where = f"{path}.responses[{r}]"
                self.need(response, dict, where, "an object")
                tokens = self.need(response.get("tokens"), dict, f"{where}.tokens", "an object")
                ids = self.need(tokens.get("ids"), list, f"{where}.tokens.ids", "a list of token ids")
                bad = next((i for i, v in enumerate(ids)
                            if isinstance(v, bool) or not isinstance(v, int) or v < 0), None)
                if bad is not None:
                    self.fail(f"{where}.tokens.ids", f"value {bad} is not a token id (an integer ≥ 0)")
                if not ids:
                    self.fail(f"{where}.tokens.ids", "a response holds at least one token")
                yield p, where, response, tokens, len(ids)

    def array(self, tokens: dict, name: str, where: str, n: int) -> np.ndarray | None:
        """tokens.<name> as float64, or None when the file leaves it out (null or absent)."""
        value = tokens.get(name)
        if value is None:
            return None
        path = f"{where}.tokens.{name}"
        self.need(value, list, path, "a list of numbers")
        if len(value) != n:
            self.fail(path, f"{len(value)} values, but tokens.ids has {n}")
        bad = next((i for i, v in enumerate(value) if not number(v)), None)
        if bad is not None:
            self.fail(path, f"value {bad} is {json.dumps(value[bad])}, not a finite number")
        return np.asarray(value, dtype=np.float64)


def _completion(rd: _Reader, where: str, response: dict, tokens: dict, n: int, beta: float,
                fresh: bool | None, pairs: list) -> dict[str, Any]:
    strings = rd.need(tokens.get("strings"), list, f"{where}.tokens.strings", "a list of strings")
    if len(strings) != n:
        rd.fail(f"{where}.tokens.strings", f"{len(strings)} values, but tokens.ids has {n}")
    if (bad := next((i for i, s in enumerate(strings) if not isinstance(s, str)), None)) is not None:
        rd.fail(f"{where}.tokens.strings", f"value {bad} is not a string")
    if "reward" not in response:
        rd.fail(f"{where}.reward", "missing")
    reward = response["reward"]
    if reward is not None and not number(reward):
        rd.fail(f"{where}.reward", "must be a number (or null: not scored)")
    logp = rd.array(tokens, "log_probs", where, n)
    if logp is None:  # build_data.py's normalisation: log_probs = log(prob)
        prob = rd.array(tokens, "prob", where, n)
        if prob is None:
            rd.fail(f"{where}.tokens.log_probs", "missing (nor is tokens.prob there): the policy's log-probs")
        assert prob is not None
        if (prob <= 0).any() or (prob > 1).any():
            rd.fail(f"{where}.tokens.prob", "a probability is in (0, 1]")
        logp = np.log(prob)
    old, ref = rd.array(tokens, "old_log_probs", where, n), rd.array(tokens, "ref_log_probs", where, n)
    if old is None and fresh is False:
        rd.fail(f"{where}.tokens.old_log_probs", f"missing, but {rd.where}.is_first_step_after_rollout_phase is "
                                                  "false: π_old is not the policy that scored these tokens")
    if ref is None and beta > 0:
        rd.fail(f"{where}.tokens.ref_log_probs", f"missing, but the KL coefficient is {beta:g}")
    advantages = rd.array(tokens, "advantages", where, n)
    advantage = response.get("advantage")
    if advantage is not None and not number(advantage):
        rd.fail(f"{where}.advantage", "must be a number")
    if advantages is not None:
        if not np.allclose(advantages, advantages[0], rtol=1e-9, atol=1e-12):
            rd.fail(f"{where}.tokens.advantages", "varies across the response's tokens (PPO's GAE?): a GRPO step "
                                                  "record holds one advantage per response")
        if advantage is not None and not math.isclose(advantages[0], advantage, rel_tol=1e-6, abs_tol=1e-9):
            rd.fail(f"{where}.tokens.advantages", f"{advantages[0]:g}, but the response's advantage is {advantage:g}")
        advantage = float(advantages[0])  # what UNIPO's token_objective multiplies
    if advantage is None:
        rd.fail(f"{where}.advantage", "missing (nor is tokens.advantages there)")
    kl = rd.array(tokens, "token_kl", where, n)
    if kl is not None and ref is not None:
        pairs.append((logp, ref, kl))
    out: dict[str, Any] = {"token_ids": tokens["ids"], "tokens": strings, "rewards": {REWARD: reward},
                           "advantage": advantage, "logprobs": logp.tolist()}
    for name, value in (("old_logprobs", old), ("ref_logprobs", ref),
                        ("entropy", rd.array(tokens, "entropy", where, n))):
        if value is not None:
            out[name] = value.tolist()
    return out


def record_from_unipo(data: Any, *, step: int | None = None, source: str = "<unipo>") -> dict[str, Any]:
    """The step record (a dict for `validate_record`) of the file's first entry holding prompts, or of
    `step`'s entry. Raises RecordError naming UNIPO's path."""
    return _convert(data, step, source, {})


def _convert(data: Any, step: int | None, source: str, paths: dict[str, str]) -> dict[str, Any]:
    if not is_unipo(data):
        raise RecordError(source, "$", "not a canonical UNIPO file (`header` and `entries` at the top level)")
    rd = _Reader(data, source, step)
    notes = [f"UNIPO canonical JSON, {rd.where} (step {rd.entry.get('step')!r}; {rd.with_prompts} of "
             f"{len(data['entries'])} entries hold prompts)"]
    config = config_from_header(rd.header, rd.hparams, rd.fail, notes, paths)
    fresh = rd.entry.get("is_first_step_after_rollout_phase")
    if fresh is not None and not isinstance(fresh, bool):  # "false" (a string) would skip the check below
        rd.fail(f"{rd.where}.is_first_step_after_rollout_phase", f"must be true or false, not {describe(fresh)}")
    pairs: list = []
    groups = []
    for p, prompt in enumerate(rd.prompts):
        rd.need(prompt, dict, f"{rd.prompts_path}[{p}]", "an object")
        groups.append({"prompt": rd.need(prompt.get("prompt"), str, f"{rd.prompts_path}[{p}].prompt", "a string"),
                       "completions": []})
    beta = float(config["beta"]) if number(config["beta"]) else 0.0
    for p, where, response, tokens, n in rd.responses():
        groups[p]["completions"].append(_completion(rd, where, response, tokens, n, beta, fresh, pairs))
    for p, group in enumerate(groups):
        if not group["completions"]:
            rd.fail(f"{rd.prompts_path}[{p}].responses", "holds no response")
    infer_estimator(config, pairs, notes)
    if any("old_logprobs" not in c for g in groups for c in g["completions"]):
        notes.append("a response without old_log_probs is taken as on-policy (π_old = π_θ, ratio 1)")
    if config["loss_aggregation"] == "token_sum_norm" and "max_length" not in config:
        config["max_length"] = max(len(c["token_ids"]) for g in groups for c in g["completions"])
        notes.append(f"assumed Dr. GRPO's constant L = the longest completion ({config['max_length']})")
    metrics = rd.need(rd.entry.get("metrics", {}), dict, f"{rd.where}.metrics", "an object")
    for key, value in metrics.items():
        if value is not None and not number(value):
            rd.fail(f"{rd.where}.metrics.{key}", "must be a number (or null)")
    model = rd.header.get("model_name")
    if not isinstance(model, str) or not model.strip():
        model = "unknown model"
        notes.append("header.model_name absent")
    source_framework = next((rd.header[k] for k in ("framework", "trainer") if isinstance(rd.header.get(k), str)), "")
    if source_framework:
        notes.append(f"source framework: {source_framework}")
    notes.append("log-prob dtype assumed float32; every token counts (UNIPO has no mask); the prompts are the "
                 "representative ones UNIPO keeps, so the logged metrics may cover more completions")
    if isinstance(rd.header.get("reward_strategy"), str):
        notes.append(f"reward: {rd.header['reward_strategy']}")
    entry_step = rd.entry.get("step")
    if isinstance(entry_step, bool) or not isinstance(entry_step, int) or entry_step < 0:
        rd.fail(f"{rd.where}.step", "must be an integer ≥ 0")
    paths.update({"run.model": "header.model_name", "run.step": f"{rd.where}.step", "metrics": f"{rd.where}.metrics",
                  "groups": rd.prompts_path})
    framework_version = rd.header.get("framework_version")
    return {"format": FORMAT, "version": VERSION,
            "run": {"framework": FRAMEWORK, "model": model[:200], "step": entry_step, "note": "; ".join(notes)[:2000],
                    "framework_version": framework_version[:100] if isinstance(framework_version, str) else ""},
            "config": config, "framework_config": rd.header, "reward_functions": [REWARD],
            "groups": groups, "metrics": metrics}


def token_objectives(data: Any, *, step: int | None = None, source: str = "<unipo>") -> list[np.ndarray]:
    """The file's `tokens.token_objective` of every response, in the record's completion order."""
    if not is_unipo(data):
        raise RecordError(source, "$", "not a canonical UNIPO file (`header` and `entries` at the top level)")
    rd = _Reader(data, source, step)
    out = []
    for _, where, _, tokens, n in rd.responses():
        value = rd.array(tokens, "token_objective", where, n)
        if value is None:
            rd.fail(f"{where}.tokens.token_objective", "missing: UNIPO derives it when absent; a check needs it")
        out.append(value)
    return out


def _unipo_path(path: str, paths: dict[str, str]) -> str:
    """A path of the converted record as the UNIPO file's (falls back to ours, marked)."""
    m = re.match(r"groups\[(\d+)\]\.completions\[(\d+)\](?:\.(\w+))?(.*)\Z", path)
    if m:
        field = FIELDS.get(m[3] or "", m[3] or "")
        return f"{paths['groups']}[{m[1]}].responses[{m[2]}]" + (f".{field}" if field else "") + m[4]
    m = re.match(r"groups\[(\d+)\](.*)\Z", path)
    if m:
        return f"{paths['groups']}[{m[1]}]{m[2]}"
    for ours, theirs in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        for prefix in (f"config.{ours}", ours):
            if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
                return theirs + path[len(prefix):]
    return f"{path} (of the converted record)"


def parse_unipo(data: Any, source: str = "<unipo>") -> StepRecord:
    """Convert and validate; a refusal of the converted record is said by UNIPO's path."""
    paths: dict[str, str] = {}
    record = _convert(data, None, source, paths)
    try:
        return validate_record(record, source)
    except RecordError as exc:
        errors = [(_unipo_path(p, paths), m.replace("token_ids", "tokens.ids")) for p, m in exc.errors]
        raise RecordError(source, *errors[0], errors=errors) from None
