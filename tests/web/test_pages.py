"""HTML pages through TestClient, checked with CSS selectors."""
import json
import re
import shutil

import pytest
from bs4 import BeautifulSoup
from snapshots import SEED_PATH, other_snapshot

HX = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def client(tmp_path_factory, make_client):
    folder = tmp_path_factory.mktemp("walkthroughs")
    shutil.copy(SEED_PATH, folder / SEED_PATH.name)
    (folder / "other.json").write_text(json.dumps(other_snapshot()))
    return make_client(walkthroughs_dir=folder, follow_redirects=False)


def soup(response):
    return BeautifulSoup(response.text, "html.parser")


def test_home_starts_the_story_at_step_1(client):
    """`/` says what GRPO is for and what the toy is, then starts at step 1; the export's own
    opening view (step 2, advantages) is one link away (docs/design.md, "The story")."""
    r = client.get("/")
    assert r.status_code == 200
    page = soup(r)
    intro = page.select_one(".home-intro").get_text(" ", strip=True)
    assert "no second network" in intro and "baseline" in intro and "four possible answers" in intro
    start = page.select_one("a#start")
    assert start["href"] == "/walkthroughs/toy_grpo/steps/policy"
    # it offers step 1's point, the sentence the step teaches, not the export's title (issue 32)
    from app.kinds.toy.views.story import STORIES
    assert start.get_text() == "Start: " + STORIES["policy"].point
    assert [li.a.get_text() for li in page.select(".home-steps li")] == [s.point for s in STORIES.values()]
    assert page.select_one("a#export-opening")["href"] == "/walkthroughs/toy_grpo"
    assert client.get("/walkthroughs/toy_grpo").headers["location"] == "/walkthroughs/toy_grpo/steps/advantages"
    # the first use of a term opens its definition; the glossary lists every term
    critic = page.select_one('.home-why button.term[popovertarget]')
    assert critic is not None and page.select_one(f'#{critic["popovertarget"]}[popover]') is not None
    from app.views.glossary import TERMS
    assert len(page.select("#glossary dt")) == len(TERMS)


def test_the_opening_step_page_is_the_exports_view(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/advantages"))
    assert page.select_one("html") and page.select_one("main #view .view-content")
    assert page.select_one("#step-export-title").get_text() == "Compare a completion’s reward with its group"
    assert page.select_one(".step-count").get_text() == "Step 2 of 4"
    assert page.select_one('[data-node-id="advantages"]')["class"].count("selected") == 1
    assert page.select_one("#inspector")["aria-label"] == "Inspector"


def test_fragment_for_htmx(client):
    r = client.get("/walkthroughs/toy_grpo/steps/clip", headers=HX)
    assert r.status_code == 200 and "HX-Request" in r.headers["vary"].split(", ")
    page = soup(r)
    assert page.select_one("html") is None and page.select_one("header") is None
    assert page.select_one(".view-content")["data-step-id"] == "clip"
    assert r.headers["hx-push-url"] == "/walkthroughs/toy_grpo/steps/clip"
    restore = client.get("/walkthroughs/toy_grpo/steps/clip", headers={**HX, "HX-History-Restore-Request": "true"})
    assert soup(restore).select_one("html") is not None


@pytest.mark.parametrize("step, selected, index", [
    ("policy", "policy.logits", 1),
    ("advantages", "advantages", 2),
    ("clip", "clipped", 3),
    ("reference", "divergence", 4),
])
def test_each_step_page(client, step, selected, index):
    page = soup(client.get(f"/walkthroughs/toy_grpo/steps/{step}"))
    # the camera frames the selection as dot lays the step out (docs/design.md §2, "Graph layout"):
    # a readable zoom (1 to 1.25) with the selected box inside the step's 1100 x 700 viewport
    x, y, z = (float(v) for v in re.findall(r"-?[\d.]+", page.select_one("#camera")["transform"]))
    assert 1 <= z <= 1.25
    rect = page.select_one(".graph .node.selected > rect")
    left, top = float(rect["x"]) * z + x, float(rect["y"]) * z + y
    assert 0 <= left and left + float(rect["width"]) * z <= 1100
    assert 0 <= top and top + float(rect["height"]) * z <= 700
    assert [n["data-node-id"] for n in page.select(".graph .node.selected")] == [selected]
    assert page.select_one(".step-count").get_text() == f"Step {index} of 4"
    assert page.select_one("[data-node-title]")["data-node-title"] == selected
    # the first step keeps a disabled, unlinked placeholder with the same id; the last leads on to the
    # reader's own run (the only featured walkthrough here; issue 49)
    prev_link, next_link = page.select_one("#prev-step[href]"), page.select_one("#next-step[href]")
    assert (prev_link is None) == (index == 1) and next_link is not None
    assert (next_link["href"] == "/walkthroughs/new") == (index == 4)
    assert page.select_one("#prev-step") is not None and page.select_one("#next-step") is not None
    for node in page.select(".graph [data-node-id]"):
        assert node["tabindex"] == "0"


def test_prev_next_links(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/advantages?seed=3"))
    assert page.select_one("#prev-step")["href"] == "/walkthroughs/toy_grpo/steps/policy?seed=3"
    assert page.select_one("#next-step")["href"] == "/walkthroughs/toy_grpo/steps/clip?seed=3"
    assert page.select_one("#next-step").get_text() == "Next"
    assert page.select_one("#prev-step").get_text() == "Previous"


def test_url_state_round_trips(client):
    url = "/walkthroughs/toy_grpo/steps/clip?expanded=clipped%2Cpolicy&node=policy.logits&seed=3&clip_epsilon=0.1"
    r = client.get(url)
    assert r.status_code == 200
    page = soup(r)
    assert page.select_one(".view-content")["data-url"] == url
    drawn = {n["data-node-id"] for n in page.select(".graph [data-node-id]")}
    assert {"policy.logits", "policy.log_probabilities", "python@clipped#0"} <= drawn
    assert "old_policy.logits" not in drawn
    assert page.select_one("[data-node-title]")["data-node-title"] == "policy.logits"
    assert page.select_one("#p-seed")["value"] == "3" and page.select_one("#p-clip_epsilon")["value"] == "0.1"
    # collapsing policy keeps the rest of the state
    toggle = page.select_one('.graph [data-node-id="policy"]')["data-toggle-href"]
    assert toggle == "/walkthroughs/toy_grpo/steps/clip?node=policy&seed=3&clip_epsilon=0.1"


def test_non_canonical_urls_redirect_to_the_canonical_one(client):
    r = client.get("/walkthroughs/toy_grpo/steps/clip?seed=10&expanded=clipped&node=clipped")
    assert r.status_code == 303 and r.headers["location"] == "/walkthroughs/toy_grpo/steps/clip"
    assert client.get("/walkthroughs/toy_grpo").headers["location"] == "/walkthroughs/toy_grpo/steps/advantages"


@pytest.mark.parametrize("query, canonical", [
    ("clip_eps=0.9", ""),                                   # misspelled: not run, and dropped
    ("clip_eps=0.9&clip_epsilon=0.3", "?clip_epsilon=0.3"),  # the known one stays
    ("view=overveiw", ""),                                  # an unknown view is not the overview
])
def test_a_page_never_runs_other_numbers_than_its_url_says(client, query, canonical):
    """Pages may ignore an unknown parameter, but then the URL must not keep it: the browser is
    sent to the URL of what actually runs (the API refuses it instead: tests/web/test_api_docs.py)."""
    r = client.get(f"/walkthroughs/toy_grpo/steps/clip?{query}")
    assert r.status_code == 303 and r.headers["location"] == "/walkthroughs/toy_grpo/steps/clip" + canonical
    page = soup(client.get(r.headers["location"]))
    assert page.select_one("#p-clip_epsilon")["value"] == ("0.3" if canonical else "0.2")


@pytest.mark.parametrize("url, text", [
    ("/walkthroughs/toy_grpo/steps/nope", "no step 'nope'"),
    ("/walkthroughs/toy_grpo/steps/clip?node=nope", "no node 'nope'"),
    ("/walkthroughs/toy_grpo/steps/clip?expanded=output", "no module 'output'"),
    ("/walkthroughs/nope/steps/clip", "unknown walkthrough 'nope'"),
    ("/no/such/page", "There is no page at this address."),
])
def test_404_pages_are_readable(client, url, text):
    r = client.get(url)
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    page = soup(r)
    assert page.select_one("h1").get_text() == "Not found"
    assert text in page.select_one(".error-page p").get_text()
    assert page.select_one('.error-page a[href="/"]')


def test_invalid_parameter_full_page_shows_message_next_to_field(client):
    r = client.get("/walkthroughs/toy_grpo/steps/clip?clip_epsilon=2")
    assert r.status_code == 422
    page = soup(r)
    field = page.select_one("#p-clip_epsilon")
    assert field["value"] == "2" and field["aria-invalid"] == "true"
    assert "less than 1" in page.select_one("#e-clip_epsilon").get_text()


def test_invalid_parameter_fragment_swaps_only_the_form(client):
    r = client.get("/walkthroughs/toy_grpo/steps/clip?group_size=8&rewards=1,0", headers=HX)
    assert r.status_code == 422
    assert r.headers["hx-retarget"] == "#param-form" and r.headers["hx-push-url"] == "false"
    page = soup(r)
    assert page.select_one("form#param-form") and page.select_one(".view-content") is None
    assert "group_size (8)" in page.select_one("#e-rewards").get_text()


def test_inspector_numbers_equal_the_api(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/clip?node=python%40clipped%230&seed=5"))
    api = client.get("/api/walkthroughs/toy_grpo/step", params={"step": "clip", "seed": 5}).json()
    values = [float(c["data-value"]) for c in page.select('#inspector [data-tensor="values"] .num')]
    grads = [float(c["data-value"]) for c in page.select('#inspector [data-tensor="grad"] .num')]
    assert values == api["nodes"]["python@clipped#0"]["values"]
    assert grads == api["nodes"]["python@clipped#0"]["grad"]
    rows = page.select("#group-table-full tbody tr")  # every term (the story's table shows the clip step's)
    assert len(rows) == len(api["samples"])
    for row, sample in zip(rows, api["samples"], strict=True):
        cells = [float(c["data-value"]) for c in row.select(".num")]
        assert cells == [sample[k] for k in ("reward", "advantage", "ratio", "clipped", "divergence", "objective", "ratio_grad")]
        assert ("clip-active" in row.get("class", [])) == sample["clip_active"]


def test_clip_step_shows_the_clip_plot_and_saturated_rows(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/clip"))
    assert page.select_one("#inspector figure svg[role=img]")
    active = page.select("#group-table tr.clip-active")
    assert active and all(r.select_one(".clip-mark") for r in active)
    assert all(float(r.select(".num")[-1]["data-value"]) == 0.0 for r in active)


def test_input_node_shows_declared_vs_traced_shape(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/policy?node=input"))
    # the export's declared example shape is information in the inspector, not an alarm on the graph
    # (issue 49, item 4)
    note = page.select_one("#inspector .shape-note").get_text()
    assert "declares a default shape 1,3,224,224" in note and "the traced input is 1,3" in note
    assert page.select_one("#inspector .warning") is None
    assert "warning" not in page.select_one('.graph [data-node-id="input"]')["class"]


def test_log_probabilities_show_probability_bars(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/policy?node=policy.log_probabilities"))
    assert page.select_one("#inspector figure svg[role=img]")


def test_security_headers_everywhere(client):
    for url, headers in (("/", {}), ("/walkthroughs/toy_grpo/steps/clip", HX), ("/api/walkthroughs", {}),
                         ("/static/js/app.js", {}), ("/healthz", {}), ("/no/such", {})):
        r = client.get(url, headers=headers)
        csp = r.headers["content-security-policy"]
        script_src = next(p for p in csp.split(";") if p.strip().startswith("script-src"))
        assert "unsafe-inline" not in script_src and "frame-ancestors 'none'" in csp, url
        assert r.headers["x-content-type-options"] == "nosniff", url
        assert r.headers["referrer-policy"] == "same-origin", url


def test_no_inline_script_style_or_handlers(client):
    for url in ("/", "/walkthroughs/toy_grpo/steps/clip?node=advantages", "/walkthroughs/other/steps/first"):
        page = soup(client.get(url))
        assert all(s.get("src") for s in page.select("script")), url
        assert not page.select("style") and not page.select("[style]"), url
        assert not [t for t in page.find_all(True) if any(a.lower().startswith("on") for a in t.attrs)], url


def test_another_snapshot_renders_view_only_and_escapes(client):
    r = client.get("/walkthroughs/other/steps/first")
    assert r.status_code == 200
    page = soup(r)
    note = page.select_one(".step-note")
    assert note.get_text() == "Note with <script>alert('x')</script> & more"
    assert not [s for s in page.select("script") if "alert" in s.get_text()]
    assert page.select_one("#step-title").get_text() == "First <i>look</i>"
    # the saved camera (50, 100, 1) framed the file's positions; dot's layout gets a camera fitted
    # to the selection `src` and its neighbours, at a readable zoom, inside the 900 x 500 viewport
    x, y, z = (float(v) for v in re.findall(r"-?[\d.]+", page.select_one("#camera")["transform"]))
    rect = page.select_one('.graph [data-node-id="src"] > rect')
    assert 1 <= z <= 1.25 and 0 <= float(rect["x"]) * z + x and float(rect["y"]) * z + y >= 0
    assert (float(rect["x"]) + float(rect["width"])) * z + x <= 900 and (float(rect["y"]) + float(rect["height"])) * z + y <= 500
    assert "view-only" in page.select_one("#inspector").get_text()
    second = soup(client.get(page.select_one("#next-step")["href"]))
    assert {n["data-node-id"] for n in second.select(".graph [data-node-id]")} >= {"block<b>", "block<b>.fc"}
    assert second.select_one(".graph .node.selected")["data-node-id"] == "block<b>.fc"


# ------------------------------------------------------------------ the parameter form's groups


def test_form_groups_every_field_with_its_explanation_and_range(client):
    from app.kinds.toy.views.form import CONVENTION_SPECS, FIELDS, PRESET_VALUES, SAMPLING_SPECS, allowed_range
    page = soup(client.get("/walkthroughs/toy_grpo/steps/clip"))
    form = page.select_one("form#param-form")
    assert form["method"] == "get" and form.select_one("#recompute") and form.select_one("#defaults")
    sampling, conventions = form.select_one("#group-sampling"), form.select_one("#group-conventions")
    # the clip step's own numbers come first (app/kinds/toy/views/story.py), and nowhere else
    step = form.select_one("#group-step")
    assert step.legend.get_text() == "This step’s numbers"
    firsts = ["clip_epsilon", "clip_epsilon_high", "dual_clip"]
    assert [f["name"] for f in step.select("input, select")] == firsts
    assert sampling.legend.get_text() == "Sampling and history"
    assert conventions.legend.get_text() == "Loss conventions (preset: DeepSeekMath paper)"
    assert [f["name"] for f in sampling.select("input, select")] == [f.name for f in SAMPLING_SPECS]
    assert [f["name"] for f in conventions.select("input, select")] == [f.name for f in CONVENTION_SPECS
                                                                      if f.name not in firsts]
    more = conventions.select_one("details#more-conventions")
    assert more is not None and not more.has_attr("open")  # nothing differs from the preset: folded
    assert {"p-beta", "p-preset"} <= {f["id"] for f in conventions.select("input, select")
                                       if f.find_parent("details", class_="more-conventions") is None}
    for spec in FIELDS:
        field = form.select_one(f"#p-{spec.name}")
        assert field is not None and field["name"] == spec.name, spec.name
        assert page.select_one(f'label[for="p-{spec.name}"]').get_text() == spec.label
        hint = page.select_one(f"#h-{spec.name}").get_text()
        assert spec.explain and spec.explain in hint, spec.name
        if allowed_range(spec.name):
            assert allowed_range(spec.name) in hint, spec.name
        assert f"h-{spec.name}" in field["aria-describedby"].split()
        if spec.choices:
            assert field.name == "select"
            assert [o["value"] for o in field.select("option")] == list(spec.choices)
    assert len(FIELDS) == 27  # + policy_loss, importance_sampling_level, is_correction, is_clip_min, is_clip_max
    # "clip ε" names one field (tests/browser/test_inspector.py finds it by its label)
    assert [spec.label for spec in FIELDS if "clip ε" in spec.label] == ["clip ε"]
    preset = form.select_one("#p-preset")
    assert json.loads(preset["data-preset-values"]) == PRESET_VALUES
    assert [o.get_text() for o in preset.select("option")][:2] == ["DeepSeekMath paper", "TRL 1.16 defaults"]
    assert form.select_one("#p-dual_clip")["value"] == "none"  # sending the form keeps it off


def test_a_changed_convention_unfolds_its_group_and_is_marked(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/clip?preset=verl&kl_estimator=k1"))
    assert page.select_one("#group-conventions legend").get_text() == "Loss conventions (preset: verl 0.9.1 GRPO)"
    more = page.select_one("details#more-conventions")
    assert more.has_attr("open") and "(1 differs from the preset)" in more.summary.get_text()
    assert "differs from the preset" in page.select_one("#h-kl_estimator").get_text()
    assert "differs from the preset" not in page.select_one("#h-beta").get_text()
    assert page.select_one("#p-dual_clip")["value"] == "3" and page.select_one("#p-preset option[selected]")["value"] == "verl"
    assert page.select_one("#conventions-line").get_text() == (
        "Conventions: verl 0.9.1 GRPO (KL estimator overridden to k1).")


@pytest.mark.parametrize("query, name, text", [
    ("dual_clip=0.5", "dual_clip", "greater than 1"),
    ("kl_bias_correction=true&kl_placement=reward", "kl_bias_correction", "kl_placement=loss"),
    ("kl_estimator=k4", "kl_estimator", "k3"),
    ("preset=openrlhf", "preset", "dapo"),
])
def test_a_refused_convention_is_named_next_to_its_field(client, query, name, text):
    # the policy step: none of these is among its own first fields, so each sits in its group
    r = client.get(f"/walkthroughs/toy_grpo/steps/policy?{query}")
    assert r.status_code == 422
    page = soup(r)
    field = page.select_one(f"#p-{name}")
    assert field["aria-invalid"] == "true" and f"e-{name}" in field["aria-describedby"].split()
    error = page.select_one(f"#e-{name}")
    assert text in error.get_text() and error.find_parent("div", class_="field") is field.find_parent("div")
    if field.find_parent("details", class_="more-conventions") is not None:  # a refusal inside the fold unfolds it
        assert page.select_one("details#more-conventions").has_attr("open")
    assert page.select_one("details#change-numbers").has_attr("open")  # and "Change the numbers" opens
    fragment = client.get(f"/walkthroughs/toy_grpo/steps/clip?{query}", headers=HX)
    assert fragment.status_code == 422 and soup(fragment).select_one(f"#e-{name}")


def test_a_refused_form_keeps_the_typed_presets_values(client):
    page = soup(client.get("/walkthroughs/toy_grpo/steps/clip?preset=verl&dual_clip=0.5"))
    assert page.select_one("#p-dual_clip")["value"] == "0.5"  # as typed, with its refusal
    assert page.select_one("#p-beta")["value"] == "0.001" and page.select_one("#p-kl_clamp")["value"] == "10"
    assert page.select_one("#p-advantage_std option[selected]")["value"] == "sample"
    assert page.select_one("#group-conventions legend").get_text() == "Loss conventions (preset: verl 0.9.1 GRPO)"
