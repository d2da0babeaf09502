"""A step record's numbers are JSON numbers, as its JSON Schema (/api/schemas/step-record) says: "0.5" (a
string) is no reward, true is no β, "3" or 3.5 is no step, and a plain list of log-probs holds numbers only.
Each refusal names the field by its path; a JSON integer still reads as a number, and packed arrays still
read. UNIPO's canonical files are held to the same rule where they hold numbers."""
from __future__ import annotations

import copy
import json

import jsonschema
import numpy as np
import pytest
from hostile import all_paths, fuzz_settings, mutate
from hypothesis import given
from hypothesis import strategies as st
from record_factory import make_record

from app.kinds.step_record.domain.arrays import pack
from app.kinds.step_record.domain.parsing import RecordError, parse_record
from app.kinds.step_record.domain.record import record_json_schema

SCHEMA = jsonschema.Draft202012Validator(record_json_schema())
C01 = ("groups", 0, "completions", 1)
C10 = ("groups", 1, "completions", 0)


def _set(raw: dict, at: tuple, value) -> dict:
    raw = copy.deepcopy(raw)
    parent = raw
    for key in at[:-1]:
        parent = parent[key]
    parent[at[-1]] = value
    return raw


def _refused(raw) -> RecordError:
    with pytest.raises(RecordError) as caught:
        parse_record(json.dumps(raw).encode(), "strict.json")  # through the JSON text, as an upload reads it
    return caught.value


# (where, the bad value, the path the refusal names, words in its message, whether JSON Schema refuses it
# too: it does for every one but a whole float where an integer goes, 3.0, which JSON Schema calls an integer)
WRONG_TYPES = [
    ((*C01, "reward"), "0.5", "groups[0].completions[1].reward", 'valid number, not the string "0.5"', True),
    ((*C10, "rewards", "accuracy"), "1", "groups[1].completions[0].rewards.accuracy", 'not the string "1"', True),
    ((*C01, "advantage"), True, "groups[0].completions[1].advantage", "valid number, not true", True),
    ((*C01, "reward"), False, "groups[0].completions[1].reward", "valid number, not false", True),
    (("config", "beta"), "0.04", "config.beta", 'valid number, not the string "0.04"', True),
    (("config", "beta"), True, "config.beta", "valid number, not true", True),
    (("config", "clip_epsilon"), "0.2", "config.clip_epsilon", 'not the string "0.2"', True),
    (("config", "token_normalizer"), "64", "config.token_normalizer", 'not the string "64"', True),
    (("metrics", "loss"), "0.1", "metrics.loss", 'not the string "0.1"', True),
    (("reward_weights",), ["1", 1.0], "reward_weights[0]", 'not the string "1"', True),
    ((*C01, "logprobs", 1), "-0.5", "groups[0].completions[1].logprobs", 'value 1 is the string "-0.5"', True),
    ((*C10, "old_logprobs", 0), True, "groups[1].completions[0].old_logprobs", "value 0 is true", True),
    ((*C01, "entropy", 2), "1.5", "groups[0].completions[1].entropy", 'value 2 is the string "1.5"', True),
    ((*C01, "token_ids", 0), "3", "groups[0].completions[1].token_ids", 'value 0 is the string "3"', True),
    ((*C01, "token_ids", 1), True, "groups[0].completions[1].token_ids", "value 1 is true", True),
    ((*C01, "token_ids", 0), 3.5, "groups[0].completions[1].token_ids", "value 0 is 3.5", True),
    (("run", "step"), "3", "run.step", 'valid integer, not the string "3"', True),
    (("run", "step"), 3.5, "run.step", "valid integer, not 3.5", True),
    (("run", "step"), True, "run.step", "valid integer, not true", True),
    (("run", "step"), 3.0, "run.step", "valid integer, not 3.0", False),
    (("config", "max_length"), "12", "config.max_length", 'valid integer, not the string "12"', True),
    (("config", "gradient_accumulation_steps"), False, "config.gradient_accumulation_steps", "not false", True),
    (("version",), True, "version", "integer 1, not true", True),
    (("config", "kl_bias_correction"), 1, "config.kl_bias_correction", "valid boolean, not 1", True),
    ((*C01, "truncated"), "true", "groups[0].completions[1].truncated", 'valid boolean, not the string "true"', True),
]


@pytest.mark.parametrize("at, value, path, words, schema_too", WRONG_TYPES,
                         ids=[f"{p}={json.dumps(v)}" for _, v, p, _, _ in WRONG_TYPES])
def test_a_value_of_the_wrong_json_type_is_refused_by_its_path(at, value, path, words, schema_too):
    raw = _set(make_record(), at, value)
    error = _refused(raw)
    assert error.path == path, error
    assert words in error.message, error
    assert str(error).startswith(f"strict.json: {path}: "), error
    if schema_too:  # the served schema refuses it as well: the parser is no laxer than it, nor here stricter
        assert not SCHEMA.is_valid(raw)


def test_a_micro_batch_must_be_an_integer_in_every_completion():
    raw = make_record()
    for group in raw["groups"]:
        for c in group["completions"]:
            c["micro_batch"] = 0
    parse_record(json.dumps(raw).encode())
    error = _refused(_set(raw, (*C10, "micro_batch"), "0"))
    assert error.path == "groups[1].completions[0].micro_batch" and 'not the string "0"' in error.message


def test_json_integers_read_as_numbers():
    """JSON Schema's "number" takes integers, and so does the parser: a reward of 1, a β of 0, a log-prob of -1."""
    raw = make_record(beta=0)
    raw["groups"][0]["completions"][1].update(reward=1, advantage=0)
    raw["groups"][1]["completions"][0]["rewards"]["accuracy"] = 1
    raw["groups"][0]["completions"][1]["logprobs"][0] = -1
    raw["groups"][0]["completions"][1]["entropy"][0] = 2
    raw.update(reward_weights=[1, 2], metrics={"loss": 0, "kl": None})
    raw["config"].update(clip_epsilon_high=1, advantage_epsilon=1)
    assert SCHEMA.is_valid(raw)
    record = parse_record(json.dumps(raw).encode())
    c = record.groups[0].completions[1]
    assert (c.reward, c.advantage, record.config.beta, record.weights) == (1.0, 0.0, 0.0, [1.0, 2.0])
    assert isinstance(c.reward, float) and isinstance(record.config.beta, float)
    assert c.logprobs[0] == -1.0 and c.logprobs.dtype == np.float64 and c.entropy[0] == 2.0
    assert record.groups[1].completions[0].rewards["accuracy"] == 1.0
    assert (record.metrics, record.config.clip_epsilon_high) == ({"loss": 0.0, "kl": None}, 1.0)


def test_packed_arrays_still_read():
    plain, packed = parse_record(make_record(seed=4)), parse_record(json.dumps(make_record(seed=4, packed=True)))
    assert np.array_equal(plain.groups[1].completions[2].logprobs, packed.groups[1].completions[2].logprobs)
    raw = make_record()
    c = raw["groups"][0]["completions"][0]
    n = len(c["token_ids"])
    c.update(logprobs=pack(-np.linspace(0.1, 2.0, n), "float32"), token_ids=pack(np.arange(n), "int32"),
             mask=[1] * n)
    done = parse_record(json.dumps(raw).encode()).groups[0].completions[0]
    assert done.token_ids.tolist() == list(range(n))
    assert np.allclose(done.logprobs, -np.linspace(0.1, 2.0, n), rtol=1e-6)


def test_a_strict_refusal_is_reported_with_the_others():
    raw = _set(_set(make_record(), ("config", "beta"), "0.04"), (*C01, "logprobs", 0), "-1")
    error = _refused(raw)
    assert ("config.beta", 'Input should be a valid number, not the string "0.04"') in error.errors
    assert any(p == "groups[0].completions[1].logprobs" and "the string" in m for p, m in error.errors)


# UNIPO's canonical files: what they hold as numbers, the reader takes only as JSON numbers
P = "entries[1].prompts"
UNIPO_WRONG = [
    (("header", "hparams", "kl_coef"), "0.04", "header.hparams.kl_coef", '"0.04"'),
    (("header", "hparams", "kl_coef"), True, "header.hparams.kl_coef", "true"),
    (("header", "hparams", "generate_max_len"), "1024", "header.hparams.generate_max_len", '"1024"'),
    (("header", "hparams", "generate_max_len"), 1024.5, "header.hparams.generate_max_len", "1024.5"),
    (("header", "hparams", "epsilon_high"), "0.28", "header.hparams.epsilon_high", '"0.28"'),
    (("header", "hparams", "gradient_accumulation_steps"), "2", "header.hparams.gradient_accumulation_steps", '"2"'),
    (("header", "hparams", "clip_eps"), "0.2", "header.hparams.clip_eps", "a number"),
    (("entries", 1, "prompts", 0, "responses", 1, "reward"), "0.5", f"{P}[0].responses[1].reward", "a number"),
    (("entries", 1, "prompts", 0, "responses", 1, "advantage"), True, f"{P}[0].responses[1].advantage", "a number"),
    (("entries", 1, "prompts", 0, "responses", 1, "tokens", "log_probs", 1), "-0.5",
     f"{P}[0].responses[1].tokens.log_probs", 'value 1 is "-0.5"'),
    (("entries", 1, "prompts", 1, "responses", 0, "tokens", "ids", 0), True, f"{P}[1].responses[0].tokens.ids",
     "value 0"),
    (("entries", 1, "step"), "1", "entries[1].step", "integer"),
    (("entries", 1, "metrics", "kl"), "0.1", "entries[1].metrics.kl", "a number"),
    (("entries", 1, "is_first_step_after_rollout_phase"), "false", "entries[1].is_first_step_after_rollout_phase",
     "true or false"),
]


@pytest.mark.parametrize("at, value, path, words", UNIPO_WRONG, ids=[f"{p}={json.dumps(v)}" for _, v, p, _ in UNIPO_WRONG])
def test_a_unipo_file_is_held_to_json_numbers_by_its_own_path(unipo, at, value, path, words):
    error = _refused(_set(unipo, at, value))
    assert error.path == path, error
    assert words in error.message, error


def test_a_unipo_kl_coef_is_read_even_when_use_kl_loss_drops_it(unipo):
    unipo["header"]["hparams"].update(kl_coef="0.04", use_kl_loss=False)
    assert _refused(unipo).path == "header.hparams.kl_coef"
    unipo["header"]["hparams"]["kl_coef"] = 0  # an integer is a number
    assert parse_record(json.dumps(unipo).encode()).config.beta == 0.0


@pytest.fixture(scope="module")
def client(make_client):
    return make_client()


@pytest.mark.parametrize("at, value, path", [
    ((*C01, "reward"), "0.5", "groups[0].completions[1].reward"),
    (("config", "beta"), "0.04", "config.beta"),
    ((*C01, "logprobs", 0), "-0.5", "groups[0].completions[1].logprobs"),
    (("run", "step"), "7", "run.step"),
])
def test_an_upload_with_a_number_as_a_string_is_refused_by_path(client, at, value, path):
    raw = _set(make_record(seed=13), at, value)
    response = client.post("/api/walkthroughs", files={"file": ("x.json", json.dumps(raw), "application/json")})
    assert response.status_code == 422, (response.status_code, response.text)
    assert f": {path}: " in response.json()["error"], response.text
    assert "string" in response.json()["error"], response.text


SEED = make_record(seed=23, groups=2, size=2, lengths=(2, 4))
PATHS = [p for p in all_paths(SEED) if p]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(-1e3, 1e3),
                   st.sampled_from(["0.5", "-0.5", "3", "true", "", "x"]), st.just([]), st.just({}),
                   st.just(["-0.5"]), st.just([True]), st.just([1, 2]), st.just([0.0, -1.0]))


@pytest.mark.slow
@fuzz_settings(300)
@given(path=st.sampled_from(PATHS), action=st.sampled_from(["replace", "stringify"]), value=VALUES)
def test_what_the_parser_accepts_the_schema_accepts(path, action, value):
    """Any one field replaced, or written as a JSON string of itself: the parser takes it only where the
    served JSON Schema does (the converse does not hold: lengths and reward names are the parser's alone)."""
    doc = mutate(SEED, path, action, value)
    try:
        parse_record(json.dumps(doc).encode(), "fuzz.json")
    except RecordError:
        return
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in SCHEMA.iter_errors(doc)]
    assert not errors, (path, action, value, errors)
