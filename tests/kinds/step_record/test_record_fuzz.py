"""Hostile step records: every field path mutated (replaced by other JSON types, deleted, duplicated),
truncated bytes, and records that are accepted then served. Contract: parse_record raises only
RecordError naming a field path; an upload answers 201/200 or 4xx, never 5xx; an accepted record's
five steps and its API answer 200."""
from __future__ import annotations

import json

import pytest
from hostile import PATH_RE, all_paths, fuzz_settings, mutate
from hypothesis import given
from hypothesis import strategies as st
from record_factory import make_record

from app.kinds.step_record.domain.parsing import RecordError, parse_record

pytestmark = pytest.mark.slow

SEED = make_record(seed=21, groups=2, size=3, lengths=(2, 5))
PATHS = [p for p in all_paths(SEED) if p]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                   st.text(max_size=5), st.just([]), st.just({}), st.just([1.0, "x"]), st.just({"dtype": "int32"}),
                   st.just({"dtype": "float32", "base64": "AAAA"}), st.just(-1e308))


def parse_or_refuse(raw) -> object | None:
    try:
        return parse_record(raw, "fuzz.json")
    except RecordError as exc:
        assert PATH_RE.match(exc.path), f"not a field path: {exc.path!r} ({exc})"
        assert exc.message
        return None


@pytest.fixture(scope="module")
def client(make_client):
    return make_client()


@fuzz_settings(400)
@given(path=st.sampled_from(PATHS), action=st.sampled_from(["replace", "delete", "duplicate", "extra"]),
       value=VALUES)
def test_mutated_records_are_refused_by_path_or_accepted(path, action, value):
    try:
        doc = mutate(SEED, path, action, value)
    except (KeyError, IndexError, TypeError):
        return
    parse_or_refuse(json.dumps(doc).encode())


@fuzz_settings(150)
@given(cut=st.integers(1, len(json.dumps(SEED)) - 1))
def test_truncated_records_are_refused_at_the_top(cut):
    raw = json.dumps(SEED).encode()[:cut]
    with pytest.raises(RecordError) as caught:
        parse_record(raw, "cut.json")
    assert caught.value.path == "$"


@fuzz_settings(40)
@given(path=st.sampled_from(PATHS), value=VALUES)
def test_uploads_never_5xx_and_accepted_records_serve(client, path, value):
    doc = mutate(SEED, path, "replace", value)
    response = client.post("/api/walkthroughs", files={"file": ("f.json", json.dumps(doc), "application/json")})
    assert response.status_code in (200, 201, 413, 422), response.text
    if response.status_code in (200, 201):
        wid = response.json()["id"]
        for step in ("group", "ratio", "kl", "loss", "diagnostics"):
            assert client.get(f"/walkthroughs/{wid}/steps/{step}").status_code == 200, (path, value, step)
        assert client.get(f"/api/walkthroughs/{wid}/step").status_code == 200
    else:
        assert ": " in response.json()["error"]


def test_a_ratio_that_overflows_is_served_not_crashed(client):
    """exp(log π − log π_old) of a 900-nat gap is ∞ in float64 (TRL, without a clamp, gets ∞ too):
    the pages say so and the API sends null, never a 5xx."""
    doc = make_record(seed=22, groups=1, size=3, lengths=(3, 3), beta=0.0)
    doc["groups"][0]["completions"][0]["old_logprobs"][0] = -900.0
    response = client.post("/api/walkthroughs", files={"file": ("f.json", json.dumps(doc), "application/json")})
    wid = response.json()["id"]
    for step in ("group", "ratio", "kl", "loss", "diagnostics"):
        assert client.get(f"/walkthroughs/{wid}/steps/{step}").status_code == 200, step
    body = client.get(f"/api/walkthroughs/{wid}/step").json()
    assert body["completions"][0]["ratio"][0] is None
