"""Following a run's folder from its explorer (issue 50; web/run_follow_server.py, web/run_follow_pages.py).

A run opened from a folder on the server's disk offers "Follow this folder as it grows": the POST has the server follow
that folder (the one the store recorded, never a path of the request) and answers 303 to the followed id, whose
explorer then grows as a writer adds steps (within 5 s), and "Stop following" ends it. A run with no folder on disk
(uploaded as an archive, or the shipped example) offers nothing and its POST is refused; the server follows at most
MAX_FOLLOWED folders; a folder followed already is not followed twice. The command-line follower ends on SIGTERM as
on Ctrl-C, and `python -m app runs delete` of a followed id deletes its version and its state file."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from archive_fixtures import zip_of
from run_fixtures import entry, state
from test_run_follow import _lines, _until

from app.__main__ import main as app_main
from app.runs.domain.run_follow import FollowStates, follow_id
from app.runs.engine.run_follower import Follower
from app.runs.engine.run_opening import open_run_dir
from app.runs.web.run_follow_server import MAX_FOLLOWED

ROOT = Path(__file__).resolve().parents[2]


def document(n: int) -> str:
    return json.dumps(state([entry(s) for s in range(1, n + 1)], close=False))


@pytest.fixture
def server(tmp_path, make_client):
    """A client of an app over tmp/data (no redirect followed); every follower it started is stopped after."""
    data = tmp_path / "data"
    client = make_client(data_dir=data, follow_redirects=False)
    yield client, data
    client.app.state.run_follows.stop_all()


def opened(client, folder: Path, steps: int = 3) -> str:
    """A run folder of `steps` steps, stored as `python -m app open FOLDER` stores it; its run id."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(document(steps))
    app = client.app
    return open_run_dir(folder, app.state.run_store, app.state.catalog.uploads).id


def last_step(client, ident: str) -> int | None:
    r = client.get(f"/api/runs/{ident}")
    return r.json()["steps"]["last"] if r.status_code == 200 else None


def test_the_explorer_follows_its_folder_as_it_grows_and_stops(tmp_path, server):
    client, data = server
    out = tmp_path / "out"
    run = opened(client, out)
    page = client.get(f"/runs/{run}")
    assert page.status_code == 200
    assert f'action="/runs/{run}/follow"' in page.text and "Follow this folder as it grows" in page.text
    assert "<strong>Following</strong>" not in page.text

    answer = client.post(f"/runs/{run}/follow")
    fid = follow_id(out)
    assert answer.status_code == 303 and answer.headers["location"] == f"/runs/{fid}"
    followed = client.get(f"/runs/{fid}")  # at once: the version it came from, said followed
    assert followed.status_code == 200 and "<strong>Following</strong>" in followed.text
    assert f'action="/runs/{fid}/unfollow"' in followed.text and "Follow this folder as it grows" not in followed.text
    assert last_step(client, fid) == 3
    # the run it came from now points at the followed id
    assert f'href="/runs/{fid}"' in client.get(f"/runs/{run}").text

    (out / "trainer_state.json").write_text(document(4))  # the trainer logs one more step
    deadline = time.monotonic() + 5
    while last_step(client, fid) != 4:
        assert time.monotonic() < deadline, "step 4 not on the followed run within 5 s"
        time.sleep(0.1)
    status = client.get(f"/runs/{fid}/follow?v=0")
    assert status.headers["HX-Trigger"] == "run-grew" and "4 steps (to step 4)" in status.text
    assert client.get(f"/api/runs/{run}").status_code == 200  # the version it came from stays (the follower did not store it)

    again = client.post(f"/runs/{run}/follow")  # followed already: the same id, no second follower
    assert again.status_code == 303 and again.headers["location"] == f"/runs/{fid}"
    assert len(client.app.state.run_follows._followed) == 1

    stopped = client.post(f"/runs/{fid}/unfollow")
    assert stopped.status_code == 303 and stopped.headers["location"] == f"/runs/{fid}"
    ended = FollowStates(data / "runs" / "follow").read(fid)
    assert ended is not None and ended.ended and ended.steps == 4
    after = client.get(f"/runs/{fid}")
    assert "ended" in after.text and f'action="/runs/{fid}/follow"' in after.text  # and may be followed again
    assert client.post(f"/runs/{fid}/unfollow").status_code == 409  # not followed by this server now


def test_a_run_with_no_folder_on_disk_offers_no_follow_and_its_post_is_refused(tmp_path, server):
    client, _ = server
    archive = zip_of([("run/trainer_state.json", document(5).encode())])
    uploaded = client.post("/api/runs", files={"archive": ("run.zip", archive, "application/zip")})
    assert uploaded.status_code == 201, uploaded.text
    run = uploaded.json()["id"]
    page = client.get(f"/runs/{run}")
    assert page.status_code == 200 and "run-follow-start" not in page.text and "/follow" not in page.text
    refused = client.post(f"/runs/{run}/follow")
    assert refused.status_code == 404 and "not opened from a folder" in refused.text
    example = client.post("/runs/examples/trl").headers["location"].rsplit("/", 1)[1]  # shipped: it never grows
    assert "run-follow-start" not in client.get(f"/runs/{example}").text
    assert client.post(f"/runs/{example}/follow").status_code == 404
    assert client.post("/runs/0123456789abcdef/follow").status_code == 404
    assert client.post("/runs/0123456789abcdef/unfollow").status_code == 404
    # a form another site posts is refused, whatever the run
    mine = opened(client, tmp_path / "mine")
    assert client.post(f"/runs/{mine}/follow", headers={"origin": "https://elsewhere.example"}).status_code == 403
    assert client.post(f"/runs/{mine}/follow", headers={"sec-fetch-site": "cross-site"}).status_code == 403
    assert not client.app.state.run_follows._followed


def test_the_server_follows_at_most_its_cap_and_never_a_folder_followed_already(tmp_path, server):
    client, data = server
    runs = [opened(client, tmp_path / f"run-{i}", steps=2 + i) for i in range(MAX_FOLLOWED + 1)]
    for run in runs[:MAX_FOLLOWED]:
        assert client.post(f"/runs/{run}/follow").status_code == 303
    refused = client.post(f"/runs/{runs[-1]}/follow")
    assert refused.status_code == 429 and "most at once" in refused.text
    assert "run-follow-start" in client.get(f"/runs/{runs[-1]}").text  # offered still: refused only past the cap
    first = follow_id(tmp_path / "run-0")
    assert client.post(f"/runs/{first}/unfollow").status_code == 303  # one stopped: room for another
    assert client.post(f"/runs/{runs[-1]}/follow").status_code == 303

    # a folder the command line follows (a fresh heartbeat) is answered with its id, not followed again
    cli = tmp_path / "cli"
    other = opened(client, cli, steps=9)  # content of its own: a run stored already keeps its first source
    app = client.app
    follower = Follower(cli, app.state.run_store, app.state.catalog.uploads, say=lambda _: None)
    stop = threading.Event()
    thread = threading.Thread(target=follower.run, args=(0.2, stop.is_set), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while follower.state.version < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        answer = client.post(f"/runs/{other}/follow")  # past the cap too: nothing started
        assert answer.status_code == 303 and answer.headers["location"] == f"/runs/{follower.id}"
        assert not app.state.run_follows.owns(follower.id)
        assert client.post(f"/runs/{follower.id}/unfollow").status_code == 409  # not this server's to stop
        assert "Stop following" not in client.get(f"/runs/{follower.id}").text
    finally:
        stop.set()
        thread.join(10)


def test_the_command_refuses_a_folder_the_server_follows(tmp_path, server, monkeypatch, capsys):
    """Two followers of one folder would store each version twice and delete each other's: the second is refused."""
    client, data = server
    run = opened(client, tmp_path / "out")
    assert client.post(f"/runs/{run}/follow").status_code == 303
    monkeypatch.setenv("DATA_DIR", str(data))
    assert app_main(["open", str(tmp_path / "out"), "--follow", "--interval", "0.1"]) == 1
    err = capsys.readouterr().err
    assert "is followed already" in err and f"/runs/{follow_id(tmp_path / 'out')}" in err
    assert client.post(f"/runs/{follow_id(tmp_path / 'out')}/unfollow").status_code == 303


def test_the_app_stops_its_followers_when_it_stops(tmp_path, make_client):
    data = tmp_path / "data"
    with make_client(data_dir=data, follow_redirects=False, compute_processes=False, warm_up=False) as client:
        run = opened(client, tmp_path / "out")
        assert client.post(f"/runs/{run}/follow").status_code == 303
        thread = next(iter(client.app.state.run_follows._followed.values())).thread
    assert not thread.is_alive()
    assert FollowStates(data / "runs" / "follow").read(follow_id(tmp_path / "out")).ended


def test_the_command_ends_on_sigterm_as_on_ctrl_c(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    out.mkdir()
    (out / "trainer_state.json").write_text(document(2))
    proc = subprocess.Popen([sys.executable, "-m", "app", "open", str(out), "--follow", "--interval", "0.2"],
                            cwd=ROOT, env={**os.environ, "DATA_DIR": str(data)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        got = _lines(proc)
        _until(got, "update 1:")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert _until(got, "stopped following")[-1] == f"stopped following {out} after 1 updates"
        ended = FollowStates(data / "runs" / "follow").read(follow_id(out))
        assert ended is not None and ended.ended and ended.steps == 2
    finally:
        if proc.poll() is None:
            proc.kill()


def test_deleting_a_followed_id_deletes_its_version_and_its_state_file(tmp_path, monkeypatch, capsys, make_client):
    data = tmp_path / "data"
    monkeypatch.setenv("DATA_DIR", str(data))
    client = make_client(data_dir=data)
    out, other = tmp_path / "out", tmp_path / "other"
    out.mkdir()
    other.mkdir()
    app = client.app
    followers = {}
    for folder, steps in ((out, 3), (other, 2)):
        (folder / "trainer_state.json").write_text(document(steps))
        f = Follower(folder, app.state.run_store, app.state.catalog.uploads, say=lambda _: None, cpu_share=1e6)
        assert f.poll()
        followers[folder] = f
    fid, version = followers[out].id, followers[out].state.run
    states = data / "runs" / "follow"

    # followed now (a fresh heartbeat): refused, nothing deleted
    assert app_main(["runs", "delete", fid]) == 2
    assert "is followed now" in capsys.readouterr().err and (states / f"{fid}.json").exists()
    for f in followers.values():
        f.end()

    assert app_main(["runs", "list"]) == 0
    listed = capsys.readouterr().out
    assert f"followed as {fid} (following ended, /runs/{fid}) from {out}" in listed
    assert app_main(["runs", "list", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    row = next(r for r in body["runs"] if r["id"] == version)
    assert row["followed"] == [{"id": fid, "url": f"/runs/{fid}", "folder": str(out), "version": version,
                                "following": False}]

    assert client.get(f"/runs/{fid}").status_code == 200
    assert app_main(["runs", "delete", fid]) == 0
    said = capsys.readouterr().out
    assert f"deleted run {version}" in said and f"followed run {fid}: its state file removed" in said
    assert not (states / f"{fid}.json").exists() and not (data / "runs" / f"{version}.json").exists()
    assert client.get(f"/runs/{fid}").status_code == 404 and client.get(f"/runs/{version}").status_code == 404

    # deleting a version by its own id removes the state file naming it too
    o_id, o_version = followers[other].id, followers[other].state.run
    assert app_main(["runs", "delete", o_version]) == 0
    assert f"followed run {o_id}" in capsys.readouterr().out
    assert not list(states.glob("*.json"))  # no state file left for a run that no longer exists
