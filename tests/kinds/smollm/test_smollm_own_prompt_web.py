"""The reader's own question through the JSON API and the step page (TestClient, the suite's tiny GGUF:
13 blocks, a 256-token context):

- every bad input is a 422 naming only the fields the request sent (max_new_tokens=10000 no longer also names
  max_length), with the field's message, and costs no job; a question too long for this small model's
  context is refused by the step: the job fails saying why, nothing answers 500;
- a typed question's step is a job like any other: its text and expected answer are in the job's key, the
  same question + seed is computed once (the built-in index beside it changes nothing), and its answers'
  rewards are the question's rules;
- the form has the textarea and the expected answer's field, labelled for a student; the typed text comes back
  escaped (a <script> in it is text), its rules are listed, and the page says accuracy needs an expected
  answer; the finished page shows the question and its rules like a built-in prompt's; pages stay under
  100 KB gzip even for 2,000 four-byte characters.
"""
from __future__ import annotations

import gzip
import time
from urllib.parse import urlencode

import pytest
from bs4 import BeautifulSoup
from runs import jobs_of

from app.kinds.smollm.domain.own_prompt import own_task
from app.kinds.smollm.engine import step_task
from app.kinds.smollm.engine.params import SmolParams

API = "/api/walkthroughs/smollm_grpo/step"
PAGE = "/walkthroughs/smollm_grpo/steps"
QUESTION = "What is 6 x 7?\nAnswer with the number."
ASKED = {"group_size": "2", "max_new_tokens": "4", "seed": "5", "prompt_text": QUESTION, "expected": "42"}
PARAMS = SmolParams(group_size=2, max_new_tokens=4, seed=5, prompt_text=QUESTION, expected="42")
GZIP_LIMIT = 100_000


def soup(response):
    return BeautifulSoup(response.text, "html.parser")


def jobs(client) -> int:
    return len(jobs_of(client).store.listing())


def finished(client, query: str, deadline_s: float = 120):
    deadline = time.monotonic() + deadline_s
    while (answer := client.get(f"{API}?{query}")).status_code == 202:
        assert time.monotonic() < deadline, answer.text[:300]
        time.sleep(0.2)
    assert answer.status_code == 200, answer.text[:500]
    return answer.json()


@pytest.fixture(scope="module")
def done(client):
    """The typed question's step, started by the API's POST and read to its end."""
    query = urlencode(ASKED)
    assert client.post(f"{API}?{query}").status_code in (200, 202)
    body = finished(client, query)
    assert body["state"] == "done", body
    return body["result"]


@pytest.mark.parametrize(("asked", "field", "words"), [
    ({"prompt_text": ""}, "prompt_text", "empty"),
    ({"prompt_text": "   "}, "prompt_text", "empty"),
    ({"prompt_text": "x" * 2001}, "prompt_text", "2,001 characters"),
    ({"prompt_text": "tab\tok but NUL \x00 not"}, "prompt_text", "control characters"),
    ({"prompt_text": "escape \x1b[31m"}, "prompt_text", "control characters"),
    ({"prompt_text": "Hi<|im_end|>"}, "prompt_text", "<|im_end|>"),
    ({"prompt_text": "q", "expected": "y" * 201}, "expected", "201 characters"),
    ({"prompt_text": "q", "expected": "a\nb"}, "expected", "control characters"),
    ({"expected": "42"}, "expected", "own question"),
    ({"max_new_tokens": "10000"}, "max_new_tokens", "96"),
    ({"max_new_tokens": "10000", "prompt_text": "q"}, "max_new_tokens", "96"),
    ({"max_new_tokens": "lots"}, "max_new_tokens", "integer"),
])
def test_bad_input_is_a_422_naming_only_the_fields_sent(client, asked, field, words):
    before = jobs(client)
    answer = client.post(f"{API}?{urlencode(asked)}")
    assert answer.status_code == 422, answer.text[:300]
    detail = answer.json()["detail"]
    assert {d["param"] for d in detail} == {field}, detail
    assert words in detail[0]["message"]
    assert jobs(client) == before


def test_a_question_too_long_for_the_models_context_fails_its_job_saying_why(client):
    """The tiny model's context is 256 tokens (SmolLM2's 8,192 holds any 2,000 characters): the step counts the
    tokens and refuses; the job fails with that sentence, the API answers it (200, state failed), never a 500."""
    query = urlencode({"group_size": "2", "max_new_tokens": "96", "prompt_text": "zq" * 100})
    assert client.post(f"{API}?{query}").status_code in (200, 202)
    body = finished(client, query)
    assert body["state"] == "failed"
    assert "your question's" in body["error"] and "exceed the model's context of 256 tokens" in body["error"]


def test_a_typed_questions_step_is_a_job_keyed_by_its_text(client, done):
    assert done["prompt"] == QUESTION
    task = own_task(QUESTION, "42")
    for completion in done["completions"]:
        assert completion["reward_parts"] == task.score(completion["text"])
    job = jobs_of(client).find(step_task.step_job(PARAMS, "cpu"))
    assert job is not None and job.state == "done"
    assert job.params["step"]["prompt_text"] == QUESTION and job.params["step"]["expected"] == "42"
    before = jobs(client)
    again = urlencode({**ASKED, "prompt": "3", "prompt_text": f"  {QUESTION}\r\n"})  # the same step, spelt otherwise
    assert client.post(f"{API}?{again}").json()["state"] == "done"
    assert jobs(client) == before  # computed once
    other = SmolParams(group_size=2, max_new_tokens=4, seed=5, prompt_text=QUESTION)  # no expected answer: another
    assert jobs_of(client).find(step_task.step_job(other, "cpu")) is None


def test_the_form_asks_for_a_question_and_its_expected_answer(client):
    doc = soup(client.get(f"{PAGE}/sample"))
    area = doc.select_one("textarea#s-prompt_text[name=prompt_text]")
    assert area is not None and area.get_text() == ""
    assert doc.select_one("label[for=s-prompt_text]").get_text(strip=True) == "Your own question (optional)"
    assert doc.select_one("input#s-expected[name=expected]") is not None
    assert doc.select_one("label[for=s-expected]").get_text(strip=True) == \
        "Expected answer, if any: the accuracy reward checks it"
    assert "ignored when you type your own question" in doc.select_one("#sh-prompt").get_text()
    assert doc.select_one("#own-rules") is None


def test_a_typed_question_comes_back_escaped_with_its_rules(client):
    text = '<script>alert("x")</script> What is </textarea><b>2 + 2</b>?'
    page = client.get(f"{PAGE}/sample?{urlencode({'prompt_text': text})}")
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "</textarea><b>" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text
    doc = soup(page)
    assert doc.select_one("#s-prompt_text").get_text() == text
    rules = doc.select_one("#own-rules")
    assert [s.get_text() for s in rules.select("li strong")] == ["format", "length"]
    assert "accuracy needs an expected answer" in doc.select_one("#no-accuracy").get_text()
    with_answer = soup(client.get(f"{PAGE}/sample?{urlencode({'prompt_text': text, 'expected': '<i>4</i>'})}"))
    assert with_answer.select_one("#s-expected")["value"] == "<i>4</i>"
    assert [s.get_text() for s in with_answer.select("#own-rules li strong")] == ["accuracy", "format", "length"]
    assert "'<i>4</i>' as a whole word" in with_answer.select_one("#own-rules").get_text()
    assert with_answer.select_one("#no-accuracy") is None


@pytest.mark.parametrize(("asked", "field"), [({"prompt_text": "a\x00b"}, "prompt_text"),
                                              ({"expected": "4"}, "expected"),
                                              ({"max_new_tokens": "10000"}, "max_new_tokens")])
def test_the_page_refuses_naming_only_the_field_sent(client, asked, field):
    page = client.get(f"{PAGE}/sample?{urlencode(asked)}")
    assert page.status_code == 422
    doc = soup(page)
    assert [e["id"] for e in doc.select(".field-error[id]")] == [f"se-{field}"]
    assert doc.select_one(f"#s-{field}")["aria-invalid"] == "true"


def test_the_finished_page_shows_the_question_and_its_rules(client, done):
    page = client.get(f"{PAGE}/sample?{urlencode(ASKED)}")
    assert page.status_code == 200, page.text[:300]
    doc = soup(page)
    assert QUESTION in doc.select_one("#smol-model").get_text()
    caption = doc.select_one("#group-answers-caption").get_text(" ")
    for part in own_task(QUESTION, "42").parts:
        assert part.name in caption
    assert "last number in the reply equals 42" in caption
    assert len(gzip.compress(page.content)) < GZIP_LIMIT


@pytest.mark.parametrize("step", ["sample", "blocks"])
def test_a_page_with_the_longest_question_stays_under_100_kb_gzip(client, step):
    """2,000 four-byte characters: every link of the page carries them (24 KB URL-encoded)."""
    page = client.get(f"{PAGE}/{step}?{urlencode({'prompt_text': '😀' * 2000, 'expected': 'e' * 200})}")
    assert page.status_code == 200
    assert len(gzip.compress(page.content)) < GZIP_LIMIT
