"""The run explorer (issue 34) over HTTP: the shipped example (a real TRL 1.16 run of 120 steps) opened from the
upload page's button; every logged metric charted, its numbers those of trainer_state.json's log_history; each
finding linked to its step; a selected step's table; zoom at full resolution; a 10,000-step run drawn cut with its
extremes kept; bad queries a 422 naming the field; the JSON twin. Nothing here is a 5xx."""
from __future__ import annotations

import json
import math
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from run_fixtures import entry, healthy, state

from app.runs.domain.run_findings import findings
from app.runs.domain.run_log import read_trainer_state
from app.runs.domain.run_series import downsample
from app.runs.domain.run_store import run_id
from app.runs.examples import RUN_EXAMPLE
from app.runs.views.run_charts import BUCKETS, DOT_LIMIT
from app.runs.views.run_view import ZOOM_SPAN
from app.views.numbers import significant

EXAMPLE = json.loads(RUN_EXAMPLE.read_text())
LOGGED = [e for e in EXAMPLE["log_history"] if "loss" in e]  # the closing entry has train_loss, not loss


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path, follow_redirects=False)


@pytest.fixture
def example(client) -> str:
    r = client.post("/runs/examples/trl")
    assert r.status_code == 303
    return r.headers["location"]


def soup(r) -> BeautifulSoup:
    assert r.status_code == 200, r.text[:500]
    return BeautifulSoup(r.text, "html.parser")


def store(client, document: dict) -> str:
    """A run stored the way `python -m app open` stores one: into the server's own run store."""
    ident, _ = client.app.state.run_store.add(json.dumps(document).encode())
    return f"/runs/{ident}"


def test_the_upload_page_offers_the_example_and_it_is_stored_once(client):
    button = soup(client.get("/walkthroughs/new")).select_one("form[action='/runs/examples/trl'] #example-run-trl")
    assert button is not None
    first = client.post("/runs/examples/trl")
    assert first.headers["location"] == f"/runs/{run_id(RUN_EXAMPLE.read_bytes())}"
    assert client.post("/runs/examples/trl").headers["location"] == first.headers["location"]
    api = client.post("/api/runs/examples/trl")
    assert api.status_code == 200 and api.json()["url"] == first.headers["location"]


def test_every_logged_metric_is_charted_with_the_values_trl_logged(client, example):
    page = soup(client.get(example))
    charts = {f["data-metric"]: f for f in page.select("figure.run-chart")}
    names = sorted({k for e in LOGGED for k in e if k not in ("step", "epoch")} | {"epoch"})
    assert sorted(charts) == names and len(names) == 27
    assert len(LOGGED) == 120 <= DOT_LIMIT  # every point is a dot with its value
    for name, figure in charts.items():
        labels = [a.title.string for a in figure.select("a.run-dot")]
        expected = [f"step {e['step']}: {significant(e[name], 4)}" for e in LOGGED]
        assert labels == expected, name
        assert figure.select_one(".run-chart-cut").string == "All 120 logged points."


def test_each_finding_is_a_sentence_linked_to_its_step_and_marked_on_its_charts(client, example):
    page = soup(client.get(example))
    rules = {li["data-rule"]: li for li in page.select("#run-findings li.finding")}
    assert list(rules) == ["tied_groups", "clip_never", "truncated", "kl_spike", "entropy_fall"]
    assert "KL spiked at step 115: 16.3, 7.8 × the median" in rules["kl_spike"].text
    assert "Entropy fell 99.7 % between steps 1 and 119" in rules["entropy_fall"].text  # not "100 %"
    links = [a["href"] for a in rules["kl_spike"].select("a.finding-step")]
    assert links == ["?step=115#selected-step"]
    kl = page.select_one("figure[data-metric='kl']")
    assert [a["aria-label"] for a in kl.select("a.run-mark.is-finding")] == ["kl_spike at step 115"]
    selected = soup(client.get(example + "?step=115"))
    assert selected.select_one("#selected-title").string == "Step 115"
    assert selected.select("figure[data-metric='kl'] a.run-mark.is-selected")


def test_the_selected_steps_table_is_every_metric_as_logged_there(client, example):
    page = soup(client.get(example + "?step=60"))
    rows = {tr.th.code.string: tr.td.string for tr in page.select(".run-step-table tbody tr")}
    logged = next(e for e in LOGGED if e["step"] == 60)
    # a whole number is a count and reads as one (12,000 tokens, not 12000.); the rest to 5 significant digits
    assert rows == {k: f"{int(v):,}" if float(v).is_integer() else significant(v, 5)
                    for k, v in logged.items() if k != "step"}
    nav = {a.string: a["href"] for a in page.select(".run-step-nav a")}
    assert nav["← previous logged step"].endswith("?step=59#selected-step")
    assert nav["next logged step →"].endswith("?step=61#selected-step")
    zoom = parse_qs(urlsplit(nav["Zoom to it"]).query)
    assert zoom == {"from": [str(60 - ZOOM_SPAN)], "to": [str(60 + ZOOM_SPAN)], "step": ["60"]}


def test_a_step_not_logged_selects_the_nearest_and_says_so(client):
    url = store(client, state([entry(s) for s in range(10, 101, 10)]))  # logging_steps 10
    page = soup(client.get(url + "?step=44"))
    assert page.select_one("#selected-title").string == "Step 40"
    assert "Step 44 was not logged" in page.select_one(".run-note").text


def test_a_long_run_is_drawn_cut_with_every_extreme_and_zoom_draws_every_point(client):
    n = 10_000
    entries = [entry(s, kl=0.01 + 1e-6 * s) for s in range(1, n + 1)]
    entries[6_543]["kl"] = 9.5  # a one-step spike at step 6,544
    entries[7_000]["loss"] = float("nan")
    url = store(client, state(entries))
    page = soup(client.get(url))
    kl = page.select_one("figure[data-metric='kl']")
    assert not kl.select("a.run-dot")  # too many points for dots: the line alone
    drawn = kl.select_one("polyline")["points"].split()
    assert 4 <= len(drawn) <= 4 * BUCKETS
    assert "highest 9.50 at step 6544" in kl.svg["aria-label"]
    assert f"of its {n} logged points drawn" in kl.select_one(".run-chart-cut").string
    loss = page.select_one("figure[data-metric='loss']")
    assert [a["aria-label"] for a in loss.select("a.run-bad")] == ["step 7001: NaN"]
    assert "not a number at step 7001" in loss.select_one(".run-chart-cut").string
    zoomed = soup(client.get(url + "?from=6500&to=6580"))
    kl = zoomed.select_one("figure[data-metric='kl']")
    assert len(kl.select("a.run-dot")) == 81 and "All 81 logged points." == kl.select_one(".run-chart-cut").string
    assert zoomed.select_one(".run-zoom strong").string == "6500–6580"


@pytest.mark.parametrize("query, field", [
    ("from=x", "from"), ("to=1.5", "to"), ("step=", "step"), ("from=90&to=30", "from"), ("from=500", "from"),
    ("to=-3", "to"), ("colour=red", "colour"),
])
def test_a_bad_query_is_a_422_page_naming_the_field(client, example, query, field):
    r = client.get(f"{example}?{query}")
    assert r.status_code == 422
    assert re.search(rf"\b{field}: ", BeautifulSoup(r.text, "html.parser").get_text())


def test_an_unknown_or_malformed_run_is_a_404(client):
    for ident in ("0123456789abcdef", "nope", "..%2F..%2Fetc"):
        assert client.get(f"/runs/{ident}").status_code == 404
        assert client.get(f"/api/runs/{ident}").status_code == 404


def test_the_json_twin_holds_every_point_the_cut_keeps_and_the_findings(client, example):
    body = client.get("/api" + example).json()
    assert body["steps"] == {"first": 1, "last": 120, "count": 120}
    log = read_trainer_state(RUN_EXAMPLE.read_bytes())
    for name in log.names:
        assert body["metrics"][name]["points"] == [[s, v] for s, v in downsample(log.series(name), BUCKETS)]
    assert [f["rule"] for f in body["findings"]] == [f.rule for f in findings(log)]
    assert body["findings"][3]["steps"] == [115] and math.isclose(body["findings"][3]["numbers"]["kl"], 16.3499, rel_tol=1e-4)
    window = client.get("/api" + example + "?from=10&to=12").json()
    assert window["window"] == {"from": 10, "to": 12}
    assert window["metrics"]["kl"]["points"] == [[e["step"], e["kl"]] for e in LOGGED[9:12]]
    for query, param in (("from=9&to=3", "from"), ("step=4", "step"), ("to=zz", "to")):
        r = client.get("/api" + example + "?" + query)
        assert r.status_code == 422 and r.json()["detail"][0]["param"] == param, r.text


def test_non_finite_values_travel_as_strings_in_json(client):
    entries = [entry(s) for s in range(1, 6)]
    entries[2]["loss"] = float("nan")
    entries[3]["grad_norm"] = float("inf")
    url = store(client, state(entries))
    body = client.get("/api" + url).json()  # strict JSON: no bare NaN
    assert body["metrics"]["loss"]["points"][2] == [3, "nan"]
    assert body["metrics"]["grad_norm"]["points"][3] == [4, "inf"]
    assert any(f["rule"] == "not_finite" for f in body["findings"])


def test_a_run_no_rule_speaks_of_says_so(client):
    page = soup(client.get(store(client, healthy(40))))
    assert not page.select("li.finding") and "None of the rules applies" in page.select_one("#run-findings").text
