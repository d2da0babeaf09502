"""app/views/urls.py alone: every link the app makes, and parameters through the URL and back."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.views import urls as toy_urls
from app.views.urls import URLS, params_query


def test_paths_of_the_app():
    assert URLS.home() == "/"
    assert URLS.upload_form() == "/walkthroughs/new"
    assert URLS.walkthrough("toy_grpo") == "/walkthroughs/toy_grpo"
    assert URLS.step("toy_grpo", "clip") == "/walkthroughs/toy_grpo/steps/clip"
    assert URLS.step("toy_grpo", "clip", {"seed": "3", "node": "ratio"}) == \
        "/walkthroughs/toy_grpo/steps/clip?seed=3&node=ratio"
    assert URLS.step("toy_grpo", "clip", {}) == "/walkthroughs/toy_grpo/steps/clip"  # no dangling "?"
    assert toy_urls.tensors("toy_grpo", {"step": "clip"}) == "/api/walkthroughs/toy_grpo/step?step=clip"
    assert toy_urls.process("r1-zero") == "/api/processes/r1-zero"
    assert URLS.api_docs() == "/docs"


@pytest.mark.parametrize("raw, quoted", [
    ("a/b", "a%2Fb"), ("..", ".."), ("x?y=1", "x%3Fy%3D1"), ("sp ace", "sp%20ace"), ("é", "%C3%A9"),
    ("#frag", "%23frag"),
])
def test_every_segment_is_quoted(raw, quoted):
    # ids come from files and uploads: a "/" or "?" in one must not become URL structure
    assert URLS.step(raw, raw) == f"/walkthroughs/{quoted}/steps/{quoted}"
    assert toy_urls.tensors(raw).startswith(f"/api/walkthroughs/{quoted}/step")


def test_query_values_are_encoded():
    url = URLS.step("w", "s", {"rewards": "1,0.5", "expanded": "policy,ratio", "node": "python@ratio#0"})
    assert dict(parse_qsl(urlsplit(url).query)) == {"rewards": "1,0.5", "expanded": "policy,ratio",
                                                    "node": "python@ratio#0"}
    assert "#" not in url  # a node id with "#" must not cut the URL


def test_params_query_lists_only_what_differs_from_the_defaults():
    assert params_query(GRPOParams()) == {}
    assert params_query(GRPOParams(seed=4, clip_epsilon=0.1, rewards="1,0,0.5,0")) == {
        "seed": "4", "group_size": "4", "clip_epsilon": "0.1", "rewards": "1,0,0.5,0"}


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), eps=st.floats(1e-9, 0.999999, allow_nan=False),
       beta=st.floats(0, 10), rewards=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=6))
def test_params_survive_the_round_trip_exactly(seed, eps, beta, rewards):
    p = GRPOParams(seed=seed, clip_epsilon=eps, beta=beta, rewards=rewards)
    assert GRPOParams(**params_query(p)) == p  # repr, not ":g": no float is rounded on the way
