"""The step-record format (docs/reference/step-record.md): what it accepts, what it refuses and where, its
compact arrays, and its JSON Schema (which accepts exactly what the parser accepts, on these cases)."""
from __future__ import annotations

import copy
import json

import jsonschema
import numpy as np
import pytest
from record_factory import make_record

from app.kinds.step_record.domain.arrays import pack
from app.kinds.step_record.domain.parsing import RecordError, parse_record
from app.kinds.step_record.domain.record import record_json_schema


def test_a_record_parses_and_keeps_every_number():
    raw = make_record(seed=1)
    record = parse_record(json.dumps(raw).encode())
    first = raw["groups"][0]["completions"][0]
    done = record.groups[0].completions[0]
    assert done.tokens == first["tokens"] and list(done.token_ids) == first["token_ids"]
    assert np.array_equal(done.logprobs, np.asarray(first["logprobs"]))
    assert record.token_count == sum(len(c["token_ids"]) for g in raw["groups"] for c in g["completions"])


def test_packed_arrays_read_as_the_same_numbers():
    plain, packed = parse_record(make_record(seed=2)), parse_record(make_record(seed=2, packed=True))
    for (_, _, a), (_, _, b) in zip(plain.completions(), packed.completions(), strict=True):
        for name in ("logprobs", "old_logprobs", "ref_logprobs", "sampling_logprobs", "entropy"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_float32_packing_is_exact_for_float32_values():
    values = np.asarray([-0.1, -2.5, -1e-7], dtype=np.float32)
    raw = make_record()
    raw["groups"][0]["completions"][0].update(token_ids=[1, 2, 3], tokens=["a", "b", "c"], logprobs=pack(values),
                                              old_logprobs=None, ref_logprobs=pack(values),
                                              sampling_logprobs=None, entropy=None)
    done = parse_record(raw).groups[0].completions[0]
    assert done.logprobs.tolist() == values.astype(np.float64).tolist()


def _refused(raw) -> RecordError:
    with pytest.raises(RecordError) as caught:
        parse_record(raw)
    return caught.value


def _edit(change):
    raw = make_record()
    change(raw)
    return raw


@pytest.mark.parametrize("change, path, words", [
    (lambda r: r["groups"][0]["completions"][1].update(logprobs=[-1.0]), "groups[0].completions[1].logprobs",
     "1 values, but token_ids has"),
    (lambda r: r["groups"][0]["completions"][0].update(tokens=["x"]), "groups[0].completions[0].tokens", "values"),
    (lambda r: r["groups"][1]["completions"][0]["logprobs"].__setitem__(0, "x"),
     "groups[1].completions[0].logprobs", "numbers"),
    (lambda r: r["groups"][0]["completions"][0]["logprobs"].__setitem__(0, 0.5),
     "groups[0].completions[0].logprobs", "between −10,000 and 0"),
    (lambda r: r["groups"][0]["completions"][2].update(logprobs={"dtype": "float32", "base64": "@@"}),
     "groups[0].completions[2].logprobs", "base64"),
    (lambda r: r["groups"][0]["completions"][2].update(logprobs={"dtype": "float16", "base64": ""}),
     "groups[0].completions[2].logprobs", "dtype"),
    (lambda r: r["groups"][0]["completions"][0].update(rewards={"accuracy": 1.0}),
     "groups[0].completions[0].rewards", "reward_functions"),
    (lambda r: r["groups"][0]["completions"][0].pop("ref_logprobs"), "groups[0].completions[0].ref_logprobs",
     "beta"),
    (lambda r: r["groups"][0]["completions"][0].update(mask=[2] * len(r["groups"][0]["completions"][0]["tokens"])),
     "groups[0].completions[0].mask", "0 or 1"),
    (lambda r: r["groups"][0]["completions"][0].pop("advantage"), "groups[0].completions[0].advantage", "required"),
    (lambda r: r["config"].update(clip_epsilon=1.5), "config.clip_epsilon", "less than 1"),
    (lambda r: r["config"].update(loss_type="dapo"), "config.loss_type", "not permitted"),
    (lambda r: r.update(groups=[]), "groups", "at least 1"),
    (lambda r: r.update(version=2), "version", "1"),
    (lambda r: r["run"].pop("model"), "run.model", "required"),
    (lambda r: r.update(reward_weights=[1.0]), "reward_weights", "2 reward functions"),
])
def test_refusals_name_the_field(change, path, words):
    error = _refused(_edit(change))
    assert error.path == path, error
    assert words in error.message, error


def test_not_json_and_non_finite_numbers_are_refused_at_the_top():
    assert _refused(b"{not json").path == "$"
    text = json.dumps(make_record()).replace('"advantage": ', '"advantage": NaN, "x": ', 1)
    assert "NaN" in _refused(text.encode()).message
    assert _refused(b"[1, 2]").message == "top level must be a JSON object"


def test_deep_nesting_is_refused_not_crashed():
    text = json.dumps(make_record())[:-1] + ', "framework_config": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    error = _refused(text.encode())
    assert error.path == "$" and "nested" in error.message


def test_the_schema_accepts_valid_records_and_refuses_what_the_parser_refuses():
    schema = record_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for raw in (make_record(), make_record(seed=3, packed=True)):
        validator.validate(raw)
    for change in (lambda r: r.update(version=2), lambda r: r["run"].pop("model"),
                   lambda r: r["config"].update(loss_type="x"), lambda r: r.update(groups=[])):
        bad = copy.deepcopy(make_record())
        change(bad)
        assert not validator.is_valid(bad)
