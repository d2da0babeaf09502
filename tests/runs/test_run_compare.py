"""Runs compared (issue 50) over HTTP: three runs whose configs differ in beta, epsilon and loss_type (each with a
recorded step carrying GRPOConfig's fields), opened as `python -m app open` opens them. The config diff lists exactly
those keys, one column per run, and says where each config came from; every shared metric is one chart with one line
per run, its numbers the logged ones; x=tokens puts TRL's num_tokens on x and says which run lacks it; the metrics
only some runs have are named; the findings sit side by side; every refusal is a 422 naming its field; the JSON
twin says the same; the explorer's "Compare with…" form gets there."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from compare_fixtures import CONFIGS, open_runs, run_document, three_runs

from app.runs.domain.run_series import downsample
from app.runs.views.run_charts import cell
from app.runs.views.run_compare import compare_url
from app.runs.views.run_compare_chart import m4


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path / "data", follow_redirects=False)


@pytest.fixture
def ids(client, tmp_path) -> list[str]:
    return three_runs(client.app, tmp_path / "dirs")


def soup(r) -> BeautifulSoup:
    assert r.status_code == 200, r.text[:800]
    return BeautifulSoup(r.text, "html.parser")


def test_the_config_diff_lists_exactly_the_keys_that_differ_one_column_per_run(client, ids):
    page = soup(client.get(compare_url(ids)))
    table = page.select_one("#cmp-config-differ")
    rows = {tr.th.code.string: [td.get_text(strip=True) for td in tr.select("td")] for tr in table.select("tbody tr")}
    assert rows == {"beta": ["0.04", "0", "0.1"], "epsilon": ["0.2", "0.28", "0.2"],
                    "loss_type": ["dapo", "dr_grpo", "grpo"]}
    assert [th.get_text(" ", strip=True) for th in table.select("thead th")][1:] == ["run A", "run B", "run C"]
    same = page.select_one("#cmp-config-same")
    assert same.summary.get_text().startswith(f"{len(same.select('tr'))} keys equal in every run")
    assert "num_generations" in same.get_text() and "beta" not in same.get_text()
    sources = page.select_one(".cmp-sources").get_text(" ", strip=True)
    assert "Runs A, B and C: from step 30's step record (its framework_config); from trainer_state.json's" in sources
    legend = [li.get_text(" ", strip=True) for li in page.select("#cmp-legend li")]
    assert legend[0].startswith("Run A β 0.04 · ε 0.2 · loss_type dapo") and ids[0] in legend[0]


def test_where_each_config_came_from_is_said_none_found_included(client, ids, tmp_path):
    bare = run_document(5)
    for key in ("max_steps", "logging_steps"):
        bare.pop(key, None)
    (plain,) = open_runs(client.app, tmp_path / "more", [(bare, None)])
    body = client.get(compare_url([ids[0], plain], api=True)).json()
    assert body["runs"][1]["config_source"].startswith("none found")
    assert body["config"]["differ"] == {}  # a key only one run has is not a difference
    assert set(body["config"]["partial"]) >= {"beta", "epsilon", "loss_type"}
    page = soup(client.get(compare_url([ids[0], plain])))
    assert "Run B: none found" in page.select_one(".cmp-sources").get_text(" ", strip=True)
    assert "(no config found)" in page.select("#cmp-legend li")[1].get_text()


def test_each_shared_metric_is_one_chart_with_one_line_per_run_of_its_logged_numbers(client, ids):
    page = soup(client.get(compare_url(ids)))
    body = client.get(compare_url(ids, api=True)).json()
    charts = {f["data-metric"]: f for f in page.select("figure.cmp-chart")}
    assert set(charts) == set(body["metrics"]) and "kl" in charts and "rewards/format/mean" not in charts
    for name, figure in charts.items():
        lines = figure.select("svg g[data-run]")
        if name == "kl":  # run B (β = 0) logged none: A and C, and it is said
            assert [g["data-run"] for g in lines] == ["A", "C"]
            assert figure.select_one(".cmp-absent").get_text() == "Not logged by run B (TRL logs kl only when β > 0)."
            continue
        assert [g["data-run"] for g in lines] == ["A", "B", "C"], name
        assert [g["class"] for g in lines] == [["cmp-run-0"], ["cmp-run-1"], ["cmp-run-2"]]
        assert all(len(g.polyline["points"].split()) == 40 for g in lines), name
        assert figure.select_one(".cmp-absent") is None
    assert set(body["metrics"]["kl"]) == {"A", "C"}
    for k, label in ((0, "A"), (2, "C")):
        logged = [[s, 0.01 * (k + 1) + 0.0001 * s] for s in range(1, 41)]
        assert body["metrics"]["kl"][label] == {"logged": 40, "points": logged}
    last = [li.get_text(" ", strip=True) for li in charts["kl"].select(".cmp-last li")]
    assert last == [f"{label} {cell(0.01 * (k + 1) + 0.004)} at step 40" for k, label in ((0, "A"), (2, "C"))]
    tokens = [li.get_text(" ", strip=True) for li in charts["num_tokens"].select(".cmp-last li")]
    assert tokens == ["A 40,000 at step 40", "B 80,000 at step 40", "C 120,000 at step 40"]
    coincide = charts["reward"].select_one(".cmp-coincide").get_text()  # the same reward in all three: said
    assert coincide.startswith("A, B and C logged the same values")


def test_metrics_only_some_runs_logged_are_named_not_dropped(client, ids):
    page = soup(client.get(compare_url(ids)))
    items = [li.get_text(" ", strip=True) for li in page.select("#cmp-only-in li")]
    assert items == ["Only in runs A and C: kl (charted above for them)",
                     "Only in run B: rewards/format/mean (not charted: one run alone)"]
    assert client.get(compare_url(ids, api=True)).json()["only_in"] == {"kl": ["A", "C"],
                                                                        "rewards/format/mean": ["B"]}


def test_x_tokens_draws_against_num_tokens_and_says_which_run_lacks_it(client, ids, tmp_path):
    body = client.get(compare_url(ids, "tokens", api=True)).json()
    assert body["x"] == "tokens" and body["x_note"] is None and "num_tokens" not in body["metrics"]
    assert body["metrics"]["reward"]["B"]["points"][:2] == [[2000.0, 0.3 + 1 / 1000], [4000.0, 0.3 + 2 / 1000]]
    (lacking,) = open_runs(client.app, tmp_path / "more", [(run_document(3, tokens=False), None)])
    page = soup(client.get(compare_url([*ids, lacking], "tokens")))
    assert page.select_one("#cmp-x-note").get_text().startswith("Run D logged no num_tokens")
    assert [g["data-run"] for g in page.select("figure[data-metric='reward'] g[data-run]")] == ["A", "B", "C"]
    assert page.select_one(".cmp-axis a")["href"] == compare_url([*ids, lacking])  # back to steps, every run
    (other,) = open_runs(client.app, tmp_path / "other", [(run_document(4, tokens=False), None)])
    r = client.get(compare_url([lacking, other], "tokens", api=True))
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "x" and "x=step" in r.json()["error"]


@pytest.mark.parametrize(("query", "param", "words"), [
    (lambda ids: [ids[0]], "run", "1 run given; compare needs 2 to 8"),
    (lambda ids: [], "run", "no run given"),
    (lambda ids: [f"{i:016x}" for i in range(9)], "run", "9 runs given; compare at most 8"),
    (lambda ids: [ids[0], "0123456789abcdef"], "run", "no stored run '0123456789abcdef'"),
    (lambda ids: [ids[0], "../../etc"], "run", "no stored run"),
    (lambda ids: [ids[0], ids[1], ids[0]], "run", "is given twice"),
])
def test_refusals_name_the_field_and_the_way_out(client, ids, query, param, words):
    url = compare_url(query(ids))
    page = client.get(url)
    assert page.status_code == 422 and f"{param}: " in page.text and words in page.text.replace("&#39;", "'")
    api = client.get("/api" + url)
    assert api.status_code == 422 and api.json()["detail"][0]["param"] == param and words in api.json()["error"]
    if "1 run" in words:
        assert ids[1] in api.json()["error"] and ids[2] in api.json()["error"]  # the runs one could add


def test_an_unknown_parameter_or_axis_is_refused_by_name(client, ids):
    for extra, param in (("&x=epochs", "x"), ("&x=step&x=tokens", "x"), ("&smooth=0.5", "smooth")):
        url = compare_url(ids[:2]) + extra
        assert client.get(url).status_code == 422 and f"{param}: " in client.get(url).text
        assert client.get("/api" + url).json()["detail"][0]["param"] == param


def test_findings_side_by_side_one_cell_per_run(client, ids):
    page = soup(client.get(compare_url(ids)))
    rows = page.select("#cmp-findings section.cmp-finding")
    assert rows and all([c["data-run"] for c in row.select(".cmp-finding-cell")] == ["A", "B", "C"] for row in rows)
    clip = page.select_one("section.cmp-finding[data-rule='clip_never']")
    assert all("The clip ratio" in c.get_text() for c in clip.select(".cmp-finding-cell"))
    assert clip.select(".cmp-finding-cell")[1].a["href"].startswith(f"/runs/{ids[1]}?step=")
    body = client.get(compare_url(ids, api=True)).json()
    assert [f["rule"] for f in body["findings"]["A"]] == [row["data-rule"] for row in rows]


def test_the_page_and_the_explorer_live_side_by_side(client, ids):
    assert client.get(f"/runs/{ids[0]}").status_code == 200  # /runs/compare did not take /runs/{id}
    assert client.get(f"/api/runs/{ids[0]}").status_code == 200
    assert client.get("/runs/compare").status_code == 422


def test_the_compare_with_form_lists_the_other_runs_and_leads_to_the_page(client, ids):
    html = client.app.state.context.templates.get_template("run_explorer/run_compare_link.html").render(
        request=SimpleNamespace(app=client.app), run=SimpleNamespace(run_id=ids[0]))
    form = BeautifulSoup(html, "html.parser").select_one("#run-compare-pick form")
    assert form["method"] == "get" and form["action"] == "/runs/compare"
    assert form.select_one("input[type=hidden]")["value"] == ids[0]
    assert sorted(i["value"] for i in form.select("input[type=checkbox]")) == sorted(ids[1:])
    chosen = "&".join(f"run={i}" for i in ids)  # what the form sends with both ticked
    assert client.get(f"/runs/compare?{chosen}").status_code == 200


def test_the_numpy_m4_keeps_the_same_points_as_the_domains():
    rng = random.Random(50)
    for n in (10, 600, 601, 1999, 10_000):
        points = [(s, rng.choice([float("nan"), float("inf")]) if rng.random() < 0.01 else round(rng.gauss(0, 1), 2))
                  for s in range(n)]
        assert [s for s, _ in m4(points)] == [s for s, _ in downsample(points, 150)]


def test_configs_equal_in_value_are_not_a_difference(client, tmp_path):
    same = dict(CONFIGS[0])
    ids = open_runs(client.app, tmp_path / "eq", [(run_document(0), same), (run_document(1), dict(same))])
    page = soup(client.get(compare_url(ids)))
    assert page.select_one("#cmp-config-differ").get_text(strip=True).startswith("No config key the runs share")
