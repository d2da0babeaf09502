"""UNIPO's canonical JSON (poloclub/unipo, docs/canonical_schema.json) opens as a step record
(app/kinds/step_record/domain/unipo.py), and a malformed one is refused by UNIPO's own field path."""
from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from record_factory import make_record
from unipo_fixture import FIXTURE, FIXTURES, fixture_script

from app.kinds.step_record.domain.parsing import RecordError, parse_record
from app.kinds.step_record.domain.unipo import is_unipo, record_from_unipo, token_objectives

P = "entries[1].prompts"  # the fixture's entry with prompts (entries[0] holds metrics only)




def tokens(data: dict, p: int, r: int) -> dict:
    return data["entries"][1]["prompts"][p]["responses"][r]["tokens"]


def test_the_fixture_is_valid_against_the_transcribed_schema(unipo):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((FIXTURES / "unipo_canonical.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(unipo, schema)


def same_to_float64_rounding(a, b, path="") -> list[str]:
    """Where two JSON values differ: the same keys, lengths, strings and integers, and floats equal to
    a few units in the last place (numpy's exp and log differ by an ulp between its releases and the
    CPU's SIMD paths: a fresh machine's numpy rewrote 5 of the fixture's numbers in their 16th digit)."""
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=1e-13, abs_tol=1e-300) else [f"{path}: {a!r} != {b!r}"]
    if type(a) is not type(b):
        return [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in same_to_float64_rounding(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in same_to_float64_rounding(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_the_fixture_is_what_its_script_writes(unipo):
    written = json.loads(json.dumps(fixture_script().build(), ensure_ascii=False))
    assert not same_to_float64_rounding(written, unipo)
    # the comparison can fail: a number off in its 12th digit, a key, a token
    bent = copy.deepcopy(unipo)
    bent["entries"][1]["metrics"]["kl"] *= 1 + 1e-11
    assert same_to_float64_rounding(written, bent) == [f".entries[1].metrics.kl: {written['entries'][1]['metrics']['kl']!r} "
                                                      f"!= {bent['entries'][1]['metrics']['kl']!r}"]


def test_recognised_by_its_keys_never_confused_with_our_format(unipo):
    assert is_unipo(unipo)
    ours = make_record()
    assert not is_unipo(ours)
    assert not is_unipo({**unipo, "format": "grpo.step-record", "version": 1})
    for other in ([], {}, {"header": {}}, {"entries": []}, "header", None):
        assert not is_unipo(other)
    assert parse_record(ours).run.framework != "unipo"  # our own records parse as before


def test_converts_to_a_step_record(unipo):
    record = parse_record(FIXTURE.read_bytes(), "unipo_canonical.json")
    run = record.run
    assert (run.framework, run.model, run.step) == ("unipo", "meta-llama/Llama-3.2-1B-Instruct", 7)
    assert "assumed" in run.note and "sample_mean" in run.note and "float32" in run.note
    c = record.config
    assert (c.policy_loss, c.loss_aggregation, c.advantage_std, c.kl_estimator) == ("clip", "sample_mean", "sample", "k3")
    assert (c.clip_epsilon, c.clip_epsilon_high, c.beta, c.max_length) == (0.2, 0.2, 0.04, 1024)
    assert record.reward_functions == ["reward"]
    assert [len(g.completions) for g in record.groups] == [4, 4]
    assert record.framework_config == unipo["header"]
    assert record.metrics["policy_objective"] == unipo["entries"][1]["metrics"]["policy_objective"]
    lengths = set()
    for (gi, ci, comp) in record.completions():
        src = unipo["entries"][1]["prompts"][gi]["responses"][ci]
        t = src["tokens"]
        assert comp.token_ids.tolist() == t["ids"] and comp.tokens == t["strings"]
        for ours, theirs in (("logprobs", "log_probs"), ("old_logprobs", "old_log_probs"),
                             ("ref_logprobs", "ref_log_probs")):
            assert getattr(comp, ours).tolist() == t[theirs]  # exact: float64 through JSON
        assert comp.advantage == src["advantage"] and comp.rewards == {"reward": src["reward"]}
        assert comp.mask is None  # UNIPO has no mask: every token counts
        lengths.add(comp.length)
    assert len(lengths) > 4 and min(lengths) >= 5 and max(lengths) <= 30  # ragged
    strings = {s for _, _, comp in record.completions() for s in comp.tokens}
    assert {"\n", "\n\n", "  "} <= strings
    assert record.groups[0].prompt == unipo["entries"][1]["prompts"][0]["prompt"]


def test_token_objectives_in_completion_order(unipo):
    objectives = token_objectives(unipo)
    record = parse_record(unipo)
    assert [len(o) for o in objectives] == [comp.length for _, _, comp in record.completions()]
    assert objectives[5].tolist() == tokens(unipo, 1, 1)["token_objective"]


def _set(path: list, value):
    def mutate(d):
        target = d
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value(target[path[-1]]) if callable(value) else value
    return mutate


_DELETE = object()
R = ["entries", 1, "prompts"]


def _tok(p: int, r: int, name: str) -> list:
    return [*R, p, "responses", r, "tokens", name]


# (mutation, the UNIPO path refused, words of the message, the transcribed JSON Schema refuses it too)
MALFORMED = [
    (_set(["header", "algorithm"], _DELETE), "header.algorithm", "missing", True),
    (_set(["header", "algorithm"], "ppo"), "header.algorithm", "not a GRPO-family", False),
    (_set(["header"], []), "header", "an object", True),
    (_set(["entries"], {}), "entries", "a list", True),
    (_set(["entries", 1, "prompts"], _DELETE), "entries", "holds prompts", False),
    (_set(_tok(0, 2, "log_probs"), lambda v: v[:-1]), f"{P}[0].responses[2].tokens.log_probs", "but tokens.ids has", False),
    (_set([*_tok(0, 2, "log_probs"), 3], None), f"{P}[0].responses[2].tokens.log_probs", "value 3 is null", True),
    (_set([*_tok(1, 0, "log_probs"), 2], 0.5), f"{P}[1].responses[0].tokens.log_probs", "between −10,000 and 0", False),
    (_set(_tok(1, 3, "ids"), _DELETE), f"{P}[1].responses[3].tokens.ids", "missing", True),
    (_set([*_tok(1, 3, "ids"), 0], -1), f"{P}[1].responses[3].tokens.ids", "value 0", True),
    (_set(_tok(0, 1, "strings"), _DELETE), f"{P}[0].responses[1].tokens.strings", "missing", True),
    (_set(_tok(0, 1, "strings"), lambda v: v[1:]), f"{P}[0].responses[1].tokens.strings", "but tokens.ids has", False),
    (_set([*_tok(0, 1, "strings"), 0], 7), f"{P}[0].responses[1].tokens.strings", "not a string", True),
    (_set([*_tok(0, 0, "advantages"), 1], 0.9), f"{P}[0].responses[0].tokens.advantages", "varies", False),
    (_set([*R, 0, "responses", 0, "advantage"], 0.5), f"{P}[0].responses[0].tokens.advantages", "advantage is", False),
    (_set([*R, 1, "responses", 2, "reward"], "high"), f"{P}[1].responses[2].reward", "a number", True),
    (_set([*R, 1, "responses", 2, "reward"], _DELETE), f"{P}[1].responses[2].reward", "missing", True),
    (_set(_tok(0, 3, "ref_log_probs"), _DELETE), f"{P}[0].responses[3].tokens.ref_log_probs", "KL coefficient", False),
    (_set(_tok(0, 3, "old_log_probs"), _DELETE), f"{P}[0].responses[3].tokens.old_log_probs",
     "is_first_step_after_rollout_phase", False),
    (_set([*R, 0, "prompt"], 5), f"{P}[0].prompt", "a string", True),
    (_set([*R, 1, "responses"], []), f"{P}[1].responses", "no response", True),
    (_set(["entries", 1, "metrics", "reward"], "0.66"), "entries[1].metrics.reward", "a number", True),
    (_set(["entries", 1, "step"], -1), "entries[1].step", "≥ 0", True),
    (_set(["header", "hparams", "clip_eps"], 1.5), "header.hparams.clip_eps", "less than 1", False),
    (_set(["header", "hparams", "clip_eps"], "wide"), "header.hparams.clip_eps", "a pair", False),
    (_set(["header", "hparams", "kl_coef"], 20), "header.hparams.kl_coef", "less than or equal to 10", False),
    (_set(["header", "hparams", "kl_estimator"], "abs"), "header.hparams.kl_estimator", "not a KL estimator", False),
    (_set(["header", "hparams", "generate_max_len"], 0), "header.hparams.generate_max_len", "greater than", False),
]


@pytest.mark.parametrize("mutate,path,words,schema_too", MALFORMED, ids=[f"{i}:{c[1]}" for i, c in enumerate(MALFORMED)])
def test_malformed_is_refused_by_the_unipo_path(unipo, mutate, path, words, schema_too):
    bad = copy.deepcopy(unipo)
    mutate(bad)
    with pytest.raises(RecordError) as caught:
        parse_record(bad, "bad.json")
    assert (caught.value.path, caught.value.source) == (path, "bad.json"), caught.value
    assert words in caught.value.message, caught.value
    if schema_too:  # where JSON Schema can say it, the transcribed schema agrees
        jsonschema = pytest.importorskip("jsonschema")
        schema = json.loads((FIXTURES / "unipo_canonical.schema.json").read_text(encoding="utf-8"))
        assert not jsonschema.Draft202012Validator(schema).is_valid(bad)


def test_a_missing_token_objective_is_refused_by_its_path(unipo):
    del tokens(unipo, 1, 2)["token_objective"]
    parse_record(unipo)  # the record itself does not need it
    with pytest.raises(RecordError) as caught:
        token_objectives(unipo)
    assert caught.value.path == f"{P}[1].responses[2].tokens.token_objective"


def test_the_estimator_is_read_from_token_kl_when_no_hparam_names_it(unipo):
    del unipo["header"]["hparams"]["kl_estimator"]
    record = parse_record(unipo)
    assert record.config.kl_estimator == "k3" and "gives the file's token_kl" in record.run.note
    for group in unipo["entries"][1]["prompts"]:
        for response in group["responses"]:
            t = response["tokens"]
            t["token_kl"] = (np.array(t["log_probs"]) - np.array(t["ref_log_probs"])).tolist()
    assert parse_record(unipo).config.kl_estimator == "k1"


def test_hparams_under_other_frameworks_names(unipo):
    h = unipo["header"]["hparams"]
    h.pop("kl_coef")
    h.update({"init_kl_coef": 0.04, "use_kl_loss": True, "clip_eps": [0.2, 0.28]})  # UNIPO's own GRPO run
    c = parse_record(unipo).config
    assert (c.beta, c.clip_epsilon, c.clip_epsilon_high) == (0.04, 0.2, 0.28)
    h["use_kl_loss"] = False  # OpenRLHF put the KL into the reward: the loss has none
    assert parse_record(unipo).config.beta == 0


def test_dr_grpo_and_dapo_take_their_explainers_conventions(unipo):
    unipo["header"]["algorithm"] = "drgrpo"
    c = parse_record(unipo).config
    assert (c.loss_aggregation, c.advantage_std, c.max_length) == ("token_sum_norm", "none", 1024)
    del unipo["header"]["hparams"]["generate_max_len"]
    record = parse_record(unipo)
    assert record.config.max_length == max(comp.length for _, _, comp in record.completions())
    assert "longest completion" in record.run.note
    unipo["header"]["algorithm"] = "DAPO"
    c = parse_record(unipo).config
    assert (c.loss_aggregation, c.advantage_std) == ("token_mean", "sample")


def test_on_policy_and_prob_only_files(unipo):
    entry = unipo["entries"][1]
    entry["is_first_step_after_rollout_phase"] = True
    t = tokens(unipo, 0, 0)
    del t["old_log_probs"]
    t["prob"] = np.exp(t.pop("log_probs")).tolist()  # build_data.py turns prob into log_probs
    comp = parse_record(unipo).groups[0].completions[0]
    assert comp.old_logprobs is None
    assert np.allclose(comp.logprobs, np.log(t["prob"]))


def test_a_step_is_chosen_and_a_blueprint_stands_in_for_its_prompts(unipo):
    with pytest.raises(RecordError) as caught:
        record_from_unipo(unipo, step=6)
    assert caught.value.path == "entries"
    unipo["blueprint"] = {"prompts": copy.deepcopy(unipo["entries"][1]["prompts"])}
    record = record_from_unipo(unipo, step=6)
    assert record["run"]["step"] == 6 and len(record["groups"]) == 2
    del unipo["blueprint"]["prompts"][0]["responses"][0]["tokens"]["ids"]
    with pytest.raises(RecordError) as caught:
        record_from_unipo(unipo, step=6)
    assert caught.value.path == "blueprint.prompts[0].responses[0].tokens.ids"
