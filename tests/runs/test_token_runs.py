"""A run directory with per-token files opened as a run (issue 34): prime-rl's (no trainer_state.json: the
run is its per-token numbers) and a TRL-shaped log with slime's train dumps beside it (the numbers join the
log's). `python -m app open` prints what it read and what it refused; the explorer draws the per-token
sections and the findings; a refused file names its path, nothing 5xx."""
from __future__ import annotations

import json

import numpy as np
from bs4 import BeautifulSoup
from run_fixtures import healthy
from test_token_exports import reference
from token_fixtures import random_seq, slime_sample, write_prime_rl, write_slime

from app.__main__ import main as app_main


def prime_run(root, steps=8, zero_from=5):
    rng = np.random.default_rng(4)
    data = {}
    for s in range(1, steps + 1):
        seqs = [random_seq(rng, outliers=2 if s == 6 else 0) for _ in range(3)]
        if s >= zero_from:  # tied groups from here: most tokens carry no gradient
            for q in seqs[:2]:
                q.advantage = 0.0
        data[s] = [seqs[:2], seqs[2:]]
    write_prime_rl(root, data)
    return data


def opened(capsys, path, code=0):
    assert app_main(["open", str(path), "--port", "8124"]) == code
    out, err = capsys.readouterr()
    return out.splitlines(), err, out.splitlines()[-1].removeprefix("open http://127.0.0.1:8124")


def test_a_prime_rl_output_directory_opens_as_a_run_of_its_tokens(tmp_path, capsys, monkeypatch, make_client):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    data = prime_run(tmp_path / "out")
    out, _, url = opened(capsys, tmp_path / "out")
    assert out[0].startswith("stored run ") and "8 logged steps (1 to 8)" in out[0]
    assert out[1] == ("per-token files (prime-rl): 16 read, 8 steps with tokens/… metrics (train/inference "
                      "mismatch, gradient triage)")
    assert any(line.startswith("- [low_signal] At step 5 only 33 % of the trained tokens carried gradient")
               for line in out)
    assert any(line.startswith("- [mismatch_band] At step 6,") for line in out)
    assert any(line.startswith("- [mask_blind]") for line in out)
    client = make_client(data_dir=tmp_path / "data")
    api = client.get("/api" + url).json()
    expected = reference([q for rank in data[6] for q in rank])
    got = api["metrics"]
    assert "tokens/mismatch_kl" in json.dumps(api)
    page = client.get(url + "?step=6")
    assert page.status_code == 200
    soup = BeautifulSoup(page.text, "html.parser")
    # nothing here was logged by a trainer: the page says the numbers are the app's, from which files
    assert soup.h1.get_text(strip=True) == "A GRPO run: 8 steps"
    assert "tokens/… from per-token files" in soup.select_one(".run-derived").get_text(" ")
    row = next(tr for tr in soup.select("tr") if tr.find(string="tokens/sequences"))
    assert row.td.get_text(strip=True) == "3"  # a count, not 3.0000
    titles = [h.get_text(" ", strip=True) for h in soup.select("h2, h3")]
    assert "Train/inference mismatch (per token)" in titles and "Gradient signal (per token)" in titles
    assert soup.select_one("#section-train-inference-mismatch-per-token") is not None
    row = next(tr for tr in soup.select("tr") if tr.find(string="tokens/mismatch_kl"))
    assert f"{expected['mismatch_kl']:.3g}"[:4] in row.get_text(" ")
    assert got["tokens/carry_gradient"]["logged"] == 8  # the JSON twin has every per-token metric too


def test_slime_dumps_beside_a_trl_log_join_its_metrics(tmp_path, capsys, monkeypatch, make_client):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "trainer_state.json").write_text(json.dumps(healthy(10)))
    rng = np.random.default_rng(9)
    write_slime(out_dir, {s: [slime_sample(random_seq(rng), i) for i in range(4)] for s in (2, 4, 12)})
    out, _, url = opened(capsys, out_dir)
    assert "per-token files (slime): 3 read, 3 steps" in out[1]
    client = make_client(data_dir=tmp_path / "data")
    page = client.get(url + "?step=4")
    assert page.status_code == 200 and "tokens/carry_gradient" in page.text and "frac_reward_zero_std" in page.text
    # step 12 is past the log's 10: the run now reaches it, with the per-token numbers only
    assert client.get(url + "?step=12").status_code == 200
    # opened again: the same run, the same numbers (the derived file only grows)
    again, _, url2 = opened(capsys, out_dir)
    assert url2 == url and again[0].startswith("already stored run")


def test_a_refused_per_token_file_is_named_and_its_step_left_out(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    prime_run(tmp_path / "out", steps=3)
    bad = tmp_path / "out" / "token_exports" / "step_2" / "rank_1.jsonl"
    bad.write_text(bad.read_text().replace('"schema_version":1', '"schema_version":"1"', 1))
    out, err, _ = opened(capsys, tmp_path / "out", code=1)
    assert "2 logged steps (1 to 3)" in out[0]
    assert f"error: {bad} line 1: schema_version: \"1\": this reader knows prime-rl's token export schema 1 " \
           "(step 2 left out)" in err


def test_a_directory_whose_every_per_token_file_is_refused_opens_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "out" / "train_data").mkdir(parents=True)
    (tmp_path / "out" / "train_data" / "0.pt").write_bytes(b"not a torch file")
    assert app_main(["open", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no trainer_state.json, and no per-token or per-sample file could be read" in err and "0.pt" in err
    assert not (tmp_path / "data" / "runs").exists() or not list((tmp_path / "data" / "runs").iterdir())
