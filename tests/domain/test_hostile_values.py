"""Odd values in a snapshot: each refused by its field at parse, never a ValueError, an
OverflowError or a page that cannot be encoded later; the extremes the limits allow load.

Bounds (app/domain/snapshot/limits.py): integers within ±(2**53 - 1) and at most 20 digits
written; floats finite (no NaN / Infinity literals, no 1e999); strings and keys valid
Unicode (no lone surrogates); node positions within ±1e6 world units; camera offsets within
±1e9 pixels and zoom in [1e-3, 1e3]; viewport sides in (0, 1e5]; step and saved-view ids
not "", "." or "..".
"""
from __future__ import annotations

import copy
import json
import math

import pytest
from hostile import assert_refused, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from snapshots import seed_dict

from app.domain.snapshot import load_snapshot, parse_snapshot
from app.domain.snapshot.limits import (
    MAX_CAMERA_OFFSET,
    MAX_INT,
    MAX_INT_DIGITS,
    MAX_POSITION,
    MAX_VIEWPORT,
    MAX_ZOOM,
    MIN_ZOOM,
)

SEED = seed_dict()
MARK = "__VALUE__"
STEP = ("collaboration", "walkthrough", "steps", 2)


def put(path: tuple, value, doc: dict | None = None) -> dict:
    doc = copy.deepcopy(SEED if doc is None else doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def raw_with(path: tuple, literal: str) -> str:
    """The seed's JSON text with a raw JSON literal at ``path`` (for what json.dumps cannot write)."""
    return json.dumps(put(path, MARK)).replace(json.dumps(MARK), literal)


def refused_at(raw, path: str, *words: str) -> str:
    exc = assert_refused(raw, source="hostile.json")
    assert exc.path == path, str(exc)
    for word in words:
        assert word in exc.message, str(exc)
    return exc.message


def round_trips(snap) -> None:
    """What was accepted can be written back as strict JSON and UTF-8."""
    json.dumps(snap.model_dump(by_alias=True), allow_nan=False).encode("utf-8")


PARAMS = ("document", "semantic", "nodes", 1, "params", "n")
PARAMS_PATH = "document.semantic.nodes[1].params.n"


# -- integers -------------------------------------------------------------------

@pytest.mark.parametrize("literal, words", [
    ("9" * 5000, ("5000 digits",)),                # int() of this raises ValueError
    ("-" + "1" * 21, ("21 digits",)),
    (str(MAX_INT + 1), ("integer beyond",)),
    (str(-(MAX_INT + 1)), ("integer beyond",)),
    ("1" + "0" * 20, ("21 digits",)),
])
def test_big_integers_are_refused_by_field(literal, words):
    refused_at(raw_with(PARAMS, literal), PARAMS_PATH, *words)


def test_a_big_integer_in_a_typed_field_is_refused_by_field():
    refused_at(raw_with(("document", "semantic", "revision"), "9" * 5000), "document.semantic.revision", "digits")
    refused_at(raw_with(("version",), "9" * 30), "version", "digits")


@pytest.mark.parametrize("value", [MAX_INT, -MAX_INT, 0, -0, 10 ** 15])
def test_integers_within_the_bound_load(value):
    snap = parse_snapshot(raw_with(PARAMS, str(value)))
    assert snap.nodes[1].params["n"] == value
    round_trips(snap)


def test_a_big_integer_in_a_dict_is_refused_too():
    refused_at(put(PARAMS, 10 ** 30), PARAMS_PATH, "integer beyond")


# -- floats ---------------------------------------------------------------------

@pytest.mark.parametrize("literal, words", [
    ("NaN", ("NaN is not a JSON number",)), ("Infinity", ("Infinity",)), ("-Infinity", ("-Infinity",)),
    ("1e999", ("overflows",)), ("-1e400", ("overflows",)),
])
def test_nan_infinity_and_overflow_literals_are_refused(literal, words):
    refused_at(raw_with(PARAMS, literal), PARAMS_PATH, *words)


def test_nan_in_a_dict_is_refused():
    refused_at(put(PARAMS, math.nan), PARAMS_PATH, "not a finite number")


def test_a_long_but_finite_float_loads():
    snap = parse_snapshot(raw_with(PARAMS, "0." + "1" * 5000))
    assert snap.nodes[1].params["n"] == pytest.approx(1 / 9)


# -- geometry ---------------------------------------------------------------------

POS = ("document", "view", "node_positions", "input", "x")
CAMERA = (*STEP, "view", "camera")
VIEWPORT = (*STEP, "view", "viewport")
CAMERA_PATH = "collaboration.walkthrough.steps[2].view.camera"
VIEWPORT_PATH = "collaboration.walkthrough.steps[2].view.viewport"


@pytest.mark.parametrize("path, value, where", [
    (POS, 1e308, "document.view.node_positions.input.x"),
    (POS, -1e8, "document.view.node_positions.input.x"),
    (POS, MAX_POSITION * (1 + 1e-9), "document.view.node_positions.input.x"),
    (("document", "view", "node_positions", "python@ratio#0", "y"), -1e308,
     'document.view.node_positions["python@ratio#0"].y'),
    ((*STEP, "view", "nodePositions", "clipped", "x"), 2e6,
     "collaboration.walkthrough.steps[2].view.nodePositions.clipped.x"),
    ((*CAMERA, "x"), 1e308, f"{CAMERA_PATH}.x"),
    ((*CAMERA, "y"), -MAX_CAMERA_OFFSET * 2, f"{CAMERA_PATH}.y"),
    ((*CAMERA, "z"), 0.0, f"{CAMERA_PATH}.z"),
    ((*CAMERA, "z"), MIN_ZOOM / 2, f"{CAMERA_PATH}.z"),
    ((*CAMERA, "z"), MAX_ZOOM * 2, f"{CAMERA_PATH}.z"),
    ((*CAMERA, "z"), 1e308, f"{CAMERA_PATH}.z"),
    ((*VIEWPORT, "width"), 0, f"{VIEWPORT_PATH}.width"),
    ((*VIEWPORT, "width"), MAX_VIEWPORT + 1, f"{VIEWPORT_PATH}.width"),
    ((*VIEWPORT, "height"), 1e308, f"{VIEWPORT_PATH}.height"),
    (("collaboration", "savedViews", 0, "view", "camera", "x"), 1e300, "collaboration.savedViews[0].view.camera.x"),
])
def test_geometry_out_of_range_is_refused_by_field(path, value, where):
    refused_at(put(path, value), where, "is outside")
    refused_at(json.dumps(put(path, value)), where, "is outside")  # the same from text


@pytest.mark.parametrize("path, value", [
    (POS, MAX_POSITION), (POS, -MAX_POSITION), ((*CAMERA, "x"), MAX_CAMERA_OFFSET),
    ((*CAMERA, "y"), -MAX_CAMERA_OFFSET), ((*CAMERA, "z"), MIN_ZOOM), ((*CAMERA, "z"), MAX_ZOOM),
    ((*VIEWPORT, "width"), MAX_VIEWPORT), ((*VIEWPORT, "height"), 1e-6),
])
def test_geometry_at_the_limits_loads(path, value):
    round_trips(parse_snapshot(json.dumps(put(path, value))))


# -- strings ----------------------------------------------------------------------

TITLE = ("collaboration", "walkthrough", "title")


def test_a_lone_surrogate_in_a_title_is_refused_by_field():
    refused_at(raw_with(TITLE, '"GRPO \\ud800"'), "collaboration.walkthrough.title", "lone surrogate", "'\\ud800'")
    refused_at(raw_with(TITLE, '"\\udfff"'), "collaboration.walkthrough.title", "lone surrogate")


def test_a_lone_surrogate_as_raw_utf8_bytes_is_refused():
    # json.loads decodes bytes with "surrogatepass", so ED A0 80 arrives as U+D800
    raw = raw_with(TITLE, '"x"').encode().replace(b'"title": "x"', b'"title": "\xed\xa0\x80"')
    refused_at(raw, "collaboration.walkthrough.title", "lone surrogate")


def test_a_lone_surrogate_in_a_key_is_refused_at_that_key():
    doc = copy.deepcopy(SEED)
    doc["document"]["view"]["node_positions"]["\ud800"] = {"x": 0, "y": 0}
    refused_at(json.dumps(doc), 'document.view.node_positions["\\ud800"]', "key", "lone surrogate")
    doc = {"\udc00": 1, **SEED}
    refused_at(json.dumps(doc), '$["\\udc00"]', "key")
    refused_at(doc, '$["\\udc00"]', "key")


def test_a_lone_surrogate_deep_in_params_and_in_node_ids():
    refused_at(raw_with((*PARAMS[:-1], "deep"), '{"a": [1, {"b": "\\ud800"}]}'),
               "document.semantic.nodes[1].params.deep.a[1].b", "lone surrogate")
    refused_at(raw_with(("document", "semantic", "nodes", 0, "node_id"), '"in\\ud800put"'),
               "document.semantic.nodes[0].node_id")


def test_a_surrogate_pair_is_a_character_and_loads():
    snap = parse_snapshot(raw_with(TITLE, '"GRPO \\ud83d\\ude00"'))
    assert snap.collaboration.walkthrough.title == "GRPO \U0001F600"
    round_trips(snap)


# -- JSON inside strings (anchor contexts) -----------------------------------------

ANCHOR = ("collaboration", "walkthrough", "steps", 0, "anchors", 0, "context")
ANCHOR_PATH = "collaboration.walkthrough.steps[0].anchors[0].context"


@pytest.mark.parametrize("inner, words", [
    ('{"contents": [{"v": NaN}]}', ("contents[0].v", "NaN")),
    ('{"contents": [{"v": ' + "7" * 5000 + "}]}", ("contents[0].v", "5000 digits")),
    ('{"contents": [{"v": "\\ud800"}]}', ("contents[0].v", "lone surrogate")),
    ('{"node": {"x": 1e999}}', ("node.x", "overflows")),
])
def test_odd_values_inside_a_json_string_are_refused_at_that_string(inner, words):
    refused_at(json.dumps(put(ANCHOR, inner)), ANCHOR_PATH, "in this JSON string", *words)


def test_odd_values_inside_a_connection_string_are_refused_at_it():
    context = json.loads(SEED["collaboration"]["walkthrough"]["steps"][0]["anchors"][0]["context"])
    context["connections"][0] = '{"kind": "x", "source": "input", "target": "policy", "w": Infinity}'
    refused_at(json.dumps(put(ANCHOR, json.dumps(context))), f"{ANCHOR_PATH}.connections[0]", "Infinity")


# -- ids that must travel in a URL path segment ------------------------------------

@pytest.mark.parametrize("bad", ["..", ".", ""])
def test_step_ids_that_a_url_cannot_carry_are_refused(bad):
    doc = put((*STEP, "id"), bad)
    refused_at(doc, "collaboration.walkthrough.steps[2].id", "URL path segment")
    doc = put(("collaboration", "savedViews", 0, "id"), bad)
    refused_at(doc, "collaboration.savedViews[0].id", "URL path segment")


@pytest.mark.parametrize("fine", ["...", ".a", "a/..", "../x", "%2e%2e", "a b?#", "\x00"])
def test_other_odd_step_ids_load(fine):
    snap = parse_snapshot(put((*STEP, "id"), fine))
    assert snap.steps[2].id == fine


# -- start-up: load_snapshot raises only SnapshotError -----------------------------

@pytest.mark.parametrize("raw", [
    raw_with(PARAMS, "9" * 5000), raw_with(TITLE, '"\\ud800"'), raw_with(POS, "1e308"), raw_with(PARAMS, "NaN"),
])
def test_a_bad_file_is_a_snapshot_error(tmp_path, raw):
    file = tmp_path / "bad.json"
    file.write_text(raw)
    with pytest.raises(ValueError) as info:
        load_snapshot(file)
    assert type(info.value).__name__ == "SnapshotError" and str(info.value).startswith("bad.json: ")


# -- properties ----------------------------------------------------------------------

ANY_CHAR = st.characters(codec=None, exclude_categories=())  # surrogates included
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


@fuzz_settings(150)
@given(st.lists(st.one_of(ANY_CHAR, SURROGATE), max_size=12).map("".join),
       st.sampled_from([TITLE, (*STEP, "note"), (*PARAMS[:-1], "shape"), (*STEP, "anchors", 0, "target", "kind")]))
def test_strings_load_exactly_when_they_are_valid_unicode(text, where):
    raw = json.dumps(put(where, text))  # \\uXXXX escapes: a high+low pair becomes one character
    decoded = json.loads(raw)
    for key in where:
        decoded = decoded[key]
    try:
        decoded.encode("utf-8")
        valid = True
    except UnicodeEncodeError:
        valid = False
    if valid:
        round_trips(parse_snapshot(raw))
    else:
        exc = assert_refused(raw)
        assert "lone surrogate" in exc.message, str(exc)


@fuzz_settings(150)
@given(st.one_of(st.integers(), st.integers(-(2 ** 70), 2 ** 70),
                 st.integers(1, 6000).map(lambda n: "8" * n), st.from_regex(r"-?[1-9][0-9]{0,40}", fullmatch=True)))
def test_integers_load_exactly_when_within_the_bound(value):
    literal = value if isinstance(value, str) else str(value)
    digits = len(literal.lstrip("-"))
    ok = digits <= MAX_INT_DIGITS and abs(int(literal)) <= MAX_INT
    raw = raw_with(PARAMS, literal)
    if ok:
        assert parse_snapshot(raw).nodes[1].params["n"] == int(literal)
    else:
        refused_at(raw, PARAMS_PATH, "digits" if digits > MAX_INT_DIGITS else "integer beyond")
