"""Write the run explorer's shipped example (issue 34): a real TRL 1.16 GRPO run, its own files.

    .venv-peers/bin/python -m peers.write_example_run [--steps 120] [--every 30]

TRL's own GRPOTrainer trains, on CPU, a tiny Llama built from a config (hidden 32, two layers: the same
model and byte-level BPE tokenizer as peers/test_trl_recorder.py, nothing downloaded) to write many "a"s
(reward `count_a`) and to stop (reward `ends`: 1 when the completion holds EOS). beta = 0.04 so KL is
logged, num_iterations = 1 (TRL's default), so the clip ratio is 0 at every step, which the explorer's
finding explains. The project's recorder (record_steps) writes every `--every`-th step beside it.

What lands in app/runs/examples/trl-1.16-run/ is what the run's output directory holds:
trainer_state.json (trainer.save_state(), every logged step) and records/step-N.grpo-step.json. Nothing
is edited after TRL wrote it; the explorer's tests read it as any uploaded run.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from app.kinds.step_record.recorders.trl import RecordingGRPOTrainer  # noqa: E402
from peers.local_tokenizer import CORPUS, bpe_tokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = ROOT / "app" / "runs" / "examples" / "trl-1.16-run"
PROMPTS = ["ab ba", "cab", "dab ab", "bad", "abba", "dad"]
TOKENIZER = bpe_tokenizer(CORPUS)


def ends(completions, completion_ids, **kwargs):
    return [1.0 if TOKENIZER.eos_token_id in ids else 0.0 for ids in completion_ids]


def count_a(completions, **kwargs):
    return [text.count("a") / 4 for text in completions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--every", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        config = LlamaConfig(vocab_size=len(TOKENIZER), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                             pad_token_id=TOKENIZER.pad_token_id, eos_token_id=TOKENIZER.eos_token_id,
                             bos_token_id=None)
        model = work / "tiny-llama"
        LlamaForCausalLM(config).save_pretrained(model)
        out = work / "run"
        grpo = GRPOConfig(output_dir=str(out), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                          logging_steps=1, disable_tqdm=True, seed=0, per_device_train_batch_size=8,
                          num_generations=4, max_completion_length=8, max_steps=args.steps, beta=0.04,
                          learning_rate=0.01, temperature=1.0)
        trainer = RecordingGRPOTrainer(model=str(model), args=grpo, reward_funcs=[ends, count_a],
                                       train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
                                       processing_class=TOKENIZER,
                                       record_steps=range(args.every, args.steps + 1, args.every),
                                       record_dir=str(out / "records"))
        trainer.train()
        trainer.save_state()
        if TARGET.exists():
            shutil.rmtree(TARGET)
        (TARGET / "records").mkdir(parents=True)
        shutil.copyfile(out / "trainer_state.json", TARGET / "trainer_state.json")
        for _step, path in sorted(trainer.step_records.items()):
            shutil.copyfile(path, TARGET / "records" / pathlib.Path(path).name)
    print(f"wrote {TARGET}: {args.steps} steps, records at {sorted(trainer.step_records)}")


if __name__ == "__main__":
    main()
