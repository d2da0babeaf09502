"""A typed question's live step (engine/step.py with engine/prompts.py's task_of) on the tiny GGUF
(smollm_tiny_gguf.py: random weights, a 300-token byte-level vocabulary, SmolLM2's ChatML template):

- the prompt ids are the chat template of the typed text, nothing else (the built-in tasks are not read);
- each answer's reward parts are own_task's rules on its text (accuracy, format, length; without an expected
  answer format and length only), the reward their sum, and the rules' sentences are the step's;
- a question too long for this model's 256-token context is refused by the step, naming your question.
"""
from __future__ import annotations

import pytest
from pydantic import ValidationError
from smollm_tiny_gguf import write_tiny_gguf

from app.engine.lm.sampling import chat_ids
from app.engine.lm.text import chat_prompt
from app.kinds.smollm.domain.own_prompt import own_task
from app.kinds.smollm.engine import checkpoint
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.engine.step import run_smol_step

SMALL = {"group_size": 4, "max_new_tokens": 6, "attention_block": 1, "seed": 3}
QUESTION = "What is 6 x 7?\nAnswer with the number."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SMOLLM_GGUF", str(path))
        return checkpoint.load(tmp_path_factory.mktemp("smollm-data"))


def test_the_prompt_is_the_chat_template_of_the_typed_text_and_the_rewards_follow_its_rules(tiny):
    params = SmolParams(**SMALL, prompt=4, prompt_text=QUESTION, expected="42")
    result = run_smol_step(params, tiny, tasks=())  # no built-in task is read
    want = tiny.tokenizer.encode(chat_prompt(tiny.chat_template, [{"role": "user", "content": QUESTION}])).ids
    assert list(result.ids[0][:result.prompt_length]) == list(want) == chat_ids(tiny, QUESTION)
    assert all(row[:result.prompt_length] == result.ids[0][:result.prompt_length] for row in result.ids)
    shown = "".join(result.prompt_tokens)
    assert f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n" in shown
    assert result.task_name == "your-question" and result.prompt_text == QUESTION
    task = own_task(QUESTION, "42")
    assert result.reward_rules == {part.name: part.pays for part in task.parts}
    assert list(result.reward_rules) == ["accuracy", "format", "length"]
    for completion in result.completions:
        assert completion.reward_parts == task.score(completion.text)
        assert completion.reward == pytest.approx(sum(completion.reward_parts.values()))


def test_without_an_expected_answer_only_format_and_length_are_scored(tiny):
    result = run_smol_step(SmolParams(**SMALL, prompt_text="Say something."), tiny, tasks=())
    assert list(result.reward_rules) == ["format", "length"]
    task = own_task("Say something.")
    assert all(c.reward_parts == task.score(c.text) for c in result.completions)


def test_a_question_too_long_for_the_models_context_is_refused_by_the_step(tiny):
    # 160 characters of text the 300-token vocabulary spells mostly byte by byte, + the template + 96 > 256
    with pytest.raises(ValidationError, match="your question's .* exceed the model's context of 256 tokens"):
        run_smol_step(SmolParams(**{**SMALL, "max_new_tokens": 96}, prompt_text="zq" * 80), tiny, tasks=())
