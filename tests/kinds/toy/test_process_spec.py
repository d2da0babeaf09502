"""The training paths as data: the embedded file loads; bad files are refused by field."""

import pytest
from paths import PROCESSES_PATH

from app.kinds.toy.domain.process_spec import ProcessSpecError, load_processes, parse_processes

EMBEDDED = PROCESSES_PATH


def test_embedded_paths_match_the_paper():
    catalog = load_processes(EMBEDDED)
    assert catalog.ids == ["r1-zero", "r1", "distillation"]
    kinds = {p.id: [s.kind for s in p.stages] for p in catalog.processes}
    assert kinds == {"r1-zero": ["grpo"],
                     "r1": ["sft", "grpo", "rejection_sampling", "sft", "grpo"],
                     "distillation": ["rejection_sampling", "distill_sft"]}
    r1 = catalog.get("r1")
    assert r1.stage("reasoning-rl").reward == ("accuracy", "format", "language")
    assert r1.stage("sft-from-base").start == "base"  # R1's SFT restarts from V3-Base (§2.3.3)
    assert catalog.get("r1-zero").stage("rl").start == "base" and catalog.get("r1-zero").stage("rl").reward == ("accuracy", "format")
    assert catalog.get("distillation").stage("curate").start == "r1"
    for p in catalog.processes:
        for s in p.stages:
            assert s.paper and s.paper_section.startswith("§") and s.toy


def _with(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize("old, new, message", [
    ('kind = "grpo"', 'kind = "ppo"', "process[0].stage[0].kind: Input should be 'sft', 'grpo', 'rejection_sampling' or 'distill_sft'"),
    ('start = "r1-cold"', 'start = "nope"', "process[1].stage[1].start: unknown checkpoint 'nope'"),
    ('reference = "r1-sft"', 'reference = "later"', "process[1].stage[4].reference: unknown checkpoint 'later'"),
    ('data = "r1-curated"', 'data = "missing"', "process[1].stage[3].data: unknown dataset 'missing'"),
    ('reward = ["accuracy", "format"]', 'reward = ["accuracy", "vibes"]', "reward: unknown component 'vibes'"),
    ('reward = ["accuracy", "format"]', 'reward = []', "needs a reward rule"),
    ('id = "r1"\n', 'id = "r1-zero"\n', "process[1].id: duplicate process 'r1-zero'"),
    ('output = "r1-rl"', 'output = "r1-cold"', "process[1].stage[1].output: 'r1-cold' is already defined"),
    ('iterations = 40', 'iterations = 0', "process[0].stage[0].iterations: Input should be greater than or equal to 1"),
    ('title = "DeepSeek-R1-Zero"', 'title = "x"\nsurprise = 1', "process[0].surprise: Extra inputs are not permitted"),
    ('[[process]]\nid = "r1-zero"', '[[process]\nid = "r1-zero"', "not valid TOML"),
])
def test_bad_files_are_refused_naming_the_field(old, new, message):
    with pytest.raises(ProcessSpecError) as info:
        parse_processes(_with(EMBEDDED.read_text(), old, new))
    assert message in str(info.value)
    assert str(info.value).startswith("processes.toml: ")


def test_a_stage_may_only_use_checkpoints_made_before_it():
    text = EMBEDDED.read_text()
    # swap two R1 stages: the reasoning RL would start from a checkpoint not made yet
    text = _with(text, 'start = "r1-cold"\n  reference = "r1-cold"', 'start = "r1-sft"\n  reference = "r1-cold"')
    with pytest.raises(ProcessSpecError, match=r"process\[1\]\.stage\[1\]\.start: unknown checkpoint 'r1-sft'"):
        parse_processes(text)
