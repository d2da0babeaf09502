"""docs/design.md §5 "How to add a kind", walked: a kind of this test's own, `coin` (a policy over two faces,
heads pays 1, whose engine is a few lines of torch), added by the doc's numbered steps and served.

- STEPS maps each numbered step of the doc to the function here that performs it: a step added to or
  removed from the doc without one here fails;
- the names each step writes in backticks are real: a `Kind` field is a field of app.web.kind.Kind, a file
  under the kind is a role's (tests/web/test_kind_roles.py) or one the kind writes, a project path exists,
  an address is one the house owns, a name is one the shared layers or the kind define; step 1 names every
  role's file, step 4 with the others every field of `Kind`, step 7 every field of `JobTask`;
- step 1 writes the kind's folder into a tmp folder (importable as `coin`), each role's file tiny but real;
  the later steps check what the doc asks of their part of it, step 5 builds the app with
  `create_app(settings, kinds=(KIND,))` instead of the line in KINDS, and no file of the project changes;
- served: its step page, its step JSON with its own typed `p` (422 naming a bad one, or an unknown
  parameter), its old address (308), its own route, its training path (a job), the OpenAPI document.
"""
from __future__ import annotations

import builtins
import dataclasses
import importlib
import importlib.util
import inspect
import json
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.requests import Request
from test_kind_roles import ROLES  # the roles' files, one table

from app.engine.jobs.tasks import JobTask
from app.web.executor import ComputeExecutor
from app.web.kind import Kind

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "design.md"
HEADING = "**How to add a kind.**"

ID = "coin"
LAYERS = ("domain", "engine", "views", "web", "templates", "static")  # a path starting so is the kind's

# -- the kind, as step 1 writes it: app/kinds/coin/, each role's file and what they import ------------------

FILES: dict[str, str] = {
    "__init__.py": '"""A kind from tests/web/test_add_a_kind.py: a coin, heads pays 1."""\n',
    "domain/__init__.py": "",
    "domain/kind_id.py": '''
        """The coin's id, on its catalog entries: written here only."""
        KIND_ID = "coin"
        ''',
    "engine/__init__.py": "",
    "engine/params.py": '''
        """The step's one parameter, p: the policy's probability of heads."""
        P_DEFAULT, P_MIN, P_MAX = 0.5, 0.0, 1.0
        LEARNING_RATE = 1.0


        def read_p(text: str | None) -> float:
            """p from the URL; ValueError("p: why") for a bad one."""
            if text is None:
                return P_DEFAULT
            try:
                p = float(text)
            except ValueError:
                raise ValueError(f"p: {text!r} is not a number") from None
            if not P_MIN <= p <= P_MAX:
                raise ValueError(f"p: {p:g} is outside [{P_MIN:g}, {P_MAX:g}]")
            return p
        ''',
    "engine/export_target.py": '''
        """The coin's model for the exporter (`python -m app.export --model coin`): its walkthrough file."""
        import torch
        from torch import nn

        from app.engine.export_target import ExportTarget


        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.logits = nn.Linear(1, 2)

            def forward(self, x):
                return torch.softmax(self.logits(x), dim=-1)


        class CoinGRPO(nn.Module):
            """The probabilities of the two faces, then the loss of a group of one flip of each."""
            def __init__(self):
                super().__init__()
                self.policy = Policy()

            def forward(self, x, rewards):
                probs = self.policy(x)
                return -(probs * (rewards - rewards.mean())).sum()


        def build():
            return CoinGRPO(), (torch.ones(1, 1), torch.tensor([[1.0, 0.0]]))


        TARGETS = (ExportTarget("coin", "a coin's policy over two faces and its GRPO loss", build),)
        ''',
    "engine/nodes.py": '''
        """The node ids the engine runs: exactly the export's."""
        NODE_IDS = frozenset({"input", "policy", "policy.logits", "softmax@policy#0", "output"})


        def matches(snapshot) -> bool:
            return snapshot.node_ids == NODE_IDS
        ''',
    "engine/step.py": '''
        """The coin's one GRPO step, in torch: a group of two flips (heads pays 1, tails 0), their advantages,
        the loss's gradient on the policy's logit, and P(heads) after one step."""
        import threading
        from dataclasses import dataclass

        import torch

        from app.engine.runtime.compute import cached_computation
        from coin.engine.params import LEARNING_RATE

        RAN_ON: list[str] = []  # the thread of each computation (a cache miss)


        @dataclass(frozen=True)
        class CoinStep:
            p: float
            probs: tuple[float, ...]
            advantages: tuple[float, ...]
            loss: float
            grad: float
            p_after: float


        @cached_computation(maxsize=64)
        def coin_step(p: float) -> CoinStep:
            RAN_ON.append(threading.current_thread().name)
            logit = torch.logit(torch.tensor(p, dtype=torch.float64), eps=1e-6).requires_grad_()
            probs = torch.stack([torch.sigmoid(logit), torch.sigmoid(-logit)])
            rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)
            advantages = (rewards - rewards.mean()) / (rewards.std(correction=0) + 1e-4)
            loss = -(probs / probs.detach() * advantages).mean()
            loss.backward()
            after = torch.sigmoid(logit.detach() - LEARNING_RATE * logit.grad)
            return CoinStep(p, tuple(probs.detach().tolist()), tuple(advantages.tolist()), loss.item(),
                            logit.grad.item(), after.item())
        ''',
    "engine/paths.py": '''
        """The coin's training path, a job: GRPO steps from P_DEFAULT, each from the last one's P(heads)."""
        from dataclasses import dataclass
        from typing import ClassVar

        from app.engine.jobs.tasks import Job, JobParams
        from coin.engine.params import P_DEFAULT
        from coin.engine.step import coin_step

        PATHS = {"learn": 6}  # path id -> steps


        @dataclass(frozen=True)
        class CoinPath:
            start: float
            heads: tuple[float, ...]  # P(heads) after each step


        class CoinPathJob(JobParams):
            task: ClassVar[str] = "coin_path"
            path: str
            p: float
            steps: int


        def job(path: str) -> Job:
            return CoinPathJob(path=path, p=P_DEFAULT, steps=PATHS[path]).job()


        def run(params: CoinPathJob, progress) -> CoinPath:
            p, heads = params.p, []
            for i in range(params.steps):
                p = coin_step(p).p_after
                heads.append(p)
                progress(params.path, i + 1, i + 1, params.steps)
            return CoinPath(params.p, tuple(heads))


        def payload(params: CoinPathJob, result: CoinPath) -> dict:
            return {"path": params.path, "start": result.start, "heads": list(result.heads)}


        def title(params: CoinPathJob) -> str:
            return f"{params.path}: {params.steps} steps from p={params.p:g}"
        ''',
    "views/__init__.py": "",
    "views/url_state.py": '''
        """The coin's part of the URL: p, written only when it is not the default."""
        from dataclasses import dataclass

        from coin.engine.params import P_DEFAULT


        @dataclass(frozen=True)
        class CoinState:
            p: float = P_DEFAULT

            def query(self) -> dict[str, str]:
                return {} if self.p == P_DEFAULT else {"p": f"{self.p:g}"}
        ''',
    "views/story.py": '''
        """What the coin's one step teaches."""
        from app.views.story import StepStory

        STORIES = {"flip": StepStory("Heads pays, so one GRPO step makes heads more likely.", focus="coin-flip")}
        ''',
    "views/meaning.py": '''
        """What each node of the coin's graph means (its describer)."""
        from app.views.meaning import NodeMeaning
        from coin.engine.nodes import matches

        MEANINGS = {
            "policy": NodeMeaning("The coin's policy", "π = softmax(W x + b)", "How likely each face is."),
            "softmax@policy#0": NodeMeaning("Face probabilities", "π_c = exp(z_c) / Σ_k exp(z_k)",
                                            "The scores turned into P(heads) and P(tails)."),
        }


        def describe_coin(snapshot, node, conventions=None, group_size=None):
            return MEANINGS.get(node.node_id) if matches(snapshot) else None
        ''',
    "views/urls.py": '''
        """The coin's own links."""
        from app.views.urls import URLS, segment, with_query

        FACES = "/api/walkthroughs/{walkthrough_id}/faces"  # its own route (web/api.py's router)
        OLD_STEP = "/api/walkthroughs/{walkthrough_id}/coin"  # where its step's JSON was (Kind.moved)


        def step_json(walkthrough_id: str, query=None) -> str:
            return URLS.step_api(walkthrough_id, query)


        def faces(walkthrough_id: str, query=None) -> str:
            return with_query(FACES.format(walkthrough_id=segment(walkthrough_id)), query)
        ''',
    "views/screen.py": '''
        """The coin's step screen: the shared graph screen plus its numbers (templates/coin/lead.html)."""
        from dataclasses import dataclass
        from typing import Any, ClassVar

        from app.views.inspector import build_inspector
        from app.views.meaning import node_meaning
        from app.views.screen import Screen, build_graph
        from coin.views import urls
        from coin.views.story import STORIES


        @dataclass(frozen=True)
        class CoinScreen(Screen):
            coin: Any = None  # the step (engine/step.py's CoinStep)

            parts: ClassVar = {"lead": "coin/lead.html"}
            leads_on: ClassVar = None
            runnable: ClassVar = True
            stories: ClassVar = STORIES

            @property
            def json_url(self) -> str:
                return urls.step_json(self.state.walkthrough_id, self.state.own.query())

            @property
            def faces_url(self) -> str:
                return urls.faces(self.state.walkthrough_id)


        def build_screen(snapshot, state, step) -> CoinScreen:
            inspector = build_inspector(snapshot, state.node, node_meaning(snapshot, state.node), None,
                                        state.step_id) if state.node else None
            return CoinScreen(snapshot, state, snapshot.step_index(state.step_id), build_graph(snapshot, state),
                              inspector, coin=step)
        ''',
    "web/__init__.py": "",
    "web/api.py": '''
        """The coin's JSON API: its step's JSON (at the house's address) and its faces (its own route)."""
        from typing import Annotated

        from fastapi import APIRouter, Query, Request
        from fastapi.responses import JSONResponse

        from app.web.deps import CatalogDep, ComputeDep, StrictQueryRoute, find_run, find_snapshot
        from coin.domain.kind_id import KIND_ID
        from coin.engine.params import P_DEFAULT, P_MAX, P_MIN
        from coin.engine.step import coin_step
        from coin.views import urls

        P = Annotated[float, Query(ge=P_MIN, le=P_MAX, description="The policy's probability of heads.")]


        async def get_step(request: Request, walkthrough_id: str, cat: CatalogDep, compute: ComputeDep,
                           p: P = P_DEFAULT) -> JSONResponse:
            find_run(cat, walkthrough_id, KIND_ID, None, None, f"{walkthrough_id!r} is not a coin")
            return await compute.run_in_app(_step, walkthrough_id, p)


        def _step(app, walkthrough_id: str, p: float) -> JSONResponse:
            """On the compute executor: the step (computed on a cache miss) and its JSON."""
            find_snapshot(app.state.catalog, walkthrough_id)
            step = coin_step(p)
            return JSONResponse({"walkthrough": walkthrough_id, "kind": KIND_ID, "p": step.p, "probs": step.probs,
                                 "advantages": step.advantages, "loss": step.loss, "grad": step.grad,
                                 "p_after": step.p_after})


        router = APIRouter(tags=["api"], route_class=StrictQueryRoute)


        @router.get(urls.FACES)
        def faces(request: Request, walkthrough_id: str, cat: CatalogDep) -> dict:
            find_run(cat, walkthrough_id, KIND_ID, None, None, f"{walkthrough_id!r} is not a coin")
            return {"faces": request.app.state.coin_faces, "step": urls.step_json(walkthrough_id)}
        ''',
    "web/pages.py": '''
        """The coin's step page: the shared page, its numbers from the engine."""
        from fastapi.exceptions import RequestValidationError

        from app.views.view_state import UnknownViewPart, ViewState
        from app.web.errors import NotFound
        from app.web.kind import StepRequest
        from app.web.step_pages import step_context, step_response
        from coin.engine.params import read_p
        from coin.engine.step import coin_step
        from coin.views.screen import build_screen
        from coin.views.url_state import CoinState


        def step_page(asked: StepRequest):
            request, query = asked.request, asked.request.query_params
            try:
                own = CoinState(read_p(query.get("p")))
            except ValueError as exc:
                raise RequestValidationError([{"loc": ("query", "p"), "type": "value_error",
                                               "msg": str(exc).partition(": ")[2]}]) from None
            try:
                state = ViewState.parse(asked.snapshot, asked.walkthrough_id, asked.step_id,
                                        expanded=query.get("expanded"), node=query.get("node"),
                                        view=query.get("view"), own=own)
            except UnknownViewPart as exc:
                raise NotFound(str(exc)) from None
            screen = build_screen(asked.snapshot, state, coin_step(own.p))
            return step_response(request, screen, step_context(screen, asked.catalog))
        ''',
    "web/kind.py": '''
        """The coin, as the house registers it."""
        from pathlib import Path

        from fastapi import FastAPI

        from app.engine.jobs.tasks import JobTask
        from app.views.urls import STEP_API
        from app.web.kind import Kind, KindRoute, Moved
        from coin.domain.kind_id import KIND_ID
        from coin.engine import export_target, paths
        from coin.engine.nodes import matches
        from coin.views import urls
        from coin.views.meaning import describe_coin
        from coin.web import api, pages

        HERE = Path(__file__).resolve().parents[1]


        def install(app: FastAPI) -> None:
            app.state.coin_faces = ["heads", "tails"]  # start-up state; its routes are `routers`


        def path_job(request, entry, path, query):
            if path not in paths.PATHS:
                raise KeyError(path)
            for name in ("seed", "scale", "iterations_scale", "conventions"):
                if query.get(name):
                    raise ValueError(f"{name}: a coin's path takes no {name}")
            return paths.job(path)


        TASK = JobTask(KIND_ID, paths.CoinPathJob, paths.run, (paths.CoinPath,), paths.payload, paths.title,
                       lane="short")

        KIND = Kind(id=KIND_ID, title="A coin: two faces, heads pays", matches=matches, step_page=pages.step_page,
                    install=install, templates=HERE / "templates", static=HERE / "static",
                    stylesheets=("coin.css",), describe=describe_coin, tasks=(TASK,), path_job=path_job,
                    export_targets=export_target.TARGETS,
                    step_api=(KindRoute(api.get_step),), routers=(api.router,),
                    moved=(Moved(urls.OLD_STEP, STEP_API),))
        ''',
    "templates/coin/lead.html": '''
        <div class="coin-flip" id="coin-flip">
          <p>P(heads) = <output id="coin-p">{{ "%.4f"|format(screen.coin.probs[0]) }}</output>; after one
             step, <output id="coin-after">{{ "%.4f"|format(screen.coin.p_after) }}</output>.</p>
          <p><a href="{{ screen.json_url }}">The step's JSON</a>, <a href="{{ screen.faces_url }}">the faces</a>.</p>
        </div>
        ''',
    "static/coin.css": ".coin-flip output { font-weight: bold; }\n",
}

STEPS_FILE = {"title": "A coin", "steps": [
    {"id": "flip", "title": "One flip of each face", "note": "Heads pays 1, tails 0.", "expanded": ["policy"],
     "selected": ["softmax@policy#0"]}]}


@dataclasses.dataclass
class Walk:
    """What the steps build, in order: the kind's folder, its walkthrough file, the app."""
    tmp: Path
    monkeypatch: pytest.MonkeyPatch
    root: Path = dataclasses.field(init=False)  # app/kinds/coin/, in the tmp folder
    walkthroughs: Path = dataclasses.field(init=False)
    snapshot: Any = None  # its walkthrough's
    toy: Any = None  # the toy's walkthrough's
    kind: Kind | None = None
    app: Any = None
    client: TestClient | None = None

    def __post_init__(self) -> None:
        self.root = self.tmp / "kinds" / ID
        self.walkthroughs = self.tmp / "walkthroughs"

    def module(self, name: str) -> ModuleType:
        return importlib.import_module(f"{ID}.{name}")


def step_1_the_folder(walk: Walk) -> None:
    for rel, text in FILES.items():
        (walk.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (walk.root / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    walk.monkeypatch.syspath_prepend(str(walk.root.parent))
    for folder in ("domain", "engine", "views", "web", f"templates/{ID}", "static"):
        assert (walk.root / folder).is_dir(), folder
    missing = [rel for rel in ROLES if not (walk.root / rel).is_file()]
    assert not missing, f"step 1 names these roles' files: {missing}"
    assert walk.module("domain.kind_id").KIND_ID == ID


def step_2_matches(walk: Walk) -> None:
    """The walkthrough file is the export of the kind's own model; `matches` is exact on its node ids."""
    from app.domain.snapshot import parse_snapshot
    from app.export.document import export
    from app.export.steps import read_steps

    steps = walk.tmp / "coin.steps.json"
    steps.write_text(json.dumps(STEPS_FILE))
    (target,) = walk.module("engine.export_target").TARGETS
    text = export(target, read_steps(steps), "2025-01-01T00:00:00+00:00")
    walk.walkthroughs.mkdir()
    (walk.walkthroughs / f"{ID}.tensorviz.json").write_text(text)
    seed = ROOT / "walkthroughs" / "toy_grpo.tensorviz.json"  # another kind's file: view-only in this app
    (walk.walkthroughs / seed.name).write_bytes(seed.read_bytes())
    walk.snapshot, walk.toy = parse_snapshot(text, source="coin"), parse_snapshot(seed.read_text(), source="toy")
    matches = walk.module("engine.nodes").matches
    assert matches(walk.snapshot) and not matches(walk.toy)


def step_3_views(walk: Walk) -> None:
    from app.views.screen import Screen
    from app.views.view_state import ViewState

    screen = walk.module("views.screen")
    assert issubclass(screen.CoinScreen, Screen) and dataclasses.is_dataclass(screen.CoinScreen)
    assert set(screen.CoinScreen.parts) <= {"focus", "form", "lead", "panels", "inspector", "record_head",
                                            "node_extra", "inspector_tail", "compare"}
    assert screen.CoinScreen.leads_on is None and set(screen.CoinScreen.stories) == {"flip"}
    state = walk.module("views.url_state").CoinState
    assert dataclasses.fields(state) and state.__dataclass_params__.frozen
    assert state().query() == {} and state(0.3).query() == {"p": "0.3"}
    assert ViewState.for_step(walk.snapshot, ID, "flip", state(0.3)).url(walk.snapshot) == \
        "/walkthroughs/coin/steps/flip?p=0.3"
    assert walk.module("views.urls").faces("a b") == "/api/walkthroughs/a%20b/faces"
    meaning = walk.module("views.meaning").describe_coin
    assert meaning(walk.snapshot, walk.snapshot.node("policy")).display_name == "The coin's policy"


def step_4_the_manifest(walk: Walk) -> None:
    from app.web.kind import KindRoute, Moved

    kind = walk.module("web.kind").KIND
    assert isinstance(kind, Kind) and kind.id == ID
    assert kind.step_page is walk.module("web.pages").step_page
    (route,) = kind.step_api
    assert isinstance(route, KindRoute) and route.endpoint is walk.module("web.api").get_step
    assert inspect.signature(route.endpoint).parameters["p"].annotation  # its own typed parameter
    assert kind.routers == (walk.module("web.api").router,)
    assert kind.moved == (Moved("/api/walkthroughs/{walkthrough_id}/coin", "/api/walkthroughs/{walkthrough_id}/step"),)
    walk.kind = kind


def step_5_one_line_in_kinds(walk: Walk) -> None:
    """The line in KINDS, as a registry with it; the app is built with the kind instead (step 8), touching
    no file of the project (the test checks `git status` at its end)."""
    from app.house import KINDS, create_app, registry
    from app.web.settings import Settings

    assert walk.kind is not None
    with_it = registry((*KINDS, walk.kind))  # names its commands, export targets and tasks apart from the others'
    assert with_it.classify(walk.snapshot) == ID and with_it.classify(walk.toy) == "toy"
    assert "coin" in with_it.export_targets
    walk.app = create_app(Settings(device="cpu", walkthroughs_dir=walk.walkthroughs, uploads_dir=walk.tmp / "uploads",
                                   data_dir=walk.tmp / "data"), kinds=(walk.kind,))
    walk.client = TestClient(walk.app, follow_redirects=False)
    assert walk.app.state.catalog.get(ID).kind == ID
    assert walk.app.state.catalog.get("toy_grpo").kind is None  # no toy here: view-only


def step_6_cached_computation(walk: Walk) -> None:
    """The step JSON and the page of one p share one computation, run in a compute worker."""
    from app.engine.runtime.compute import CachedComputation

    assert walk.client is not None
    step = walk.module("engine.step")
    assert isinstance(step.coin_step, CachedComputation)
    assert walk.client.get("/api/walkthroughs/coin/step?p=0.3").status_code == 200
    assert walk.client.get("/walkthroughs/coin/steps/flip?p=0.3").status_code == 200
    assert step.RAN_ON and all(name.startswith("compute") for name in step.RAN_ON), step.RAN_ON
    assert len(step.RAN_ON) == step.coin_step.cache_len() == 1  # the page's was a cache hit


def step_7_jobs(walk: Walk) -> None:
    """Its path is a JobTask the runners take from the registry: POST starts it, GET reads it."""
    assert walk.client is not None
    assert set(walk.app.state.kinds.tasks) == {"coin_path"}
    url = "/api/walkthroughs/coin/paths/learn"
    assert walk.client.get(url).status_code == 404  # a GET starts nothing
    started = walk.client.post(url)
    assert started.status_code in (200, 202), started.text
    deadline = time.monotonic() + 30
    while (answer := walk.client.get(url)).status_code == 202:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.05)
    body = answer.json()
    assert answer.status_code == 200 and body["state"] == "done", body
    heads = body["result"]["heads"]
    assert body["result"]["path"] == "learn" and len(heads) == 6 and heads == sorted(heads) and heads[-1] > 0.9
    assert walk.client.post("/api/walkthroughs/coin/paths/nope").status_code == 404  # KeyError
    refused = walk.client.post(url + "?seed=3")  # ValueError("seed: …")
    assert refused.status_code == 422 and refused.json()["detail"][0]["param"] == "seed", refused.text


def step_8_its_tests(walk: Walk) -> None:
    """Its tests build the app with it alone: this test is one (step 5 built it so)."""
    assert walk.kind is not None
    assert walk.app.state.kinds.kinds == (walk.kind,)


STEPS: dict[int, Callable[[Walk], None]] = {
    1: step_1_the_folder, 2: step_2_matches, 3: step_3_views, 4: step_4_the_manifest,
    5: step_5_one_line_in_kinds, 6: step_6_cached_computation, 7: step_7_jobs, 8: step_8_its_tests,
}


def doc_steps() -> dict[int, str]:
    """The numbered steps of "How to add a kind": {number: its text, continuation lines joined}."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADING))
    steps: dict[int, str] = {}
    for line in lines[start + 1:]:
        if not line.strip() and steps:
            break
        if (m := re.match(r"^(\d+)\. (.*)", line)) is not None:
            assert int(m[1]) not in steps, f"step {m[1]} twice"
            steps[int(m[1])] = m[2]
        elif steps:
            steps[max(steps)] += " " + line.strip()
    return steps


def test_the_doc_has_exactly_the_steps_this_test_walks():
    assert list(doc_steps()) == list(STEPS), "a step added to or removed from the doc: walk it here (STEPS)"


# -- the names in each step are real ------------------------------------------------------------------

# Where a name the doc writes may be defined (besides `Kind`'s fields, the classes the same step names, and
# the kind's own files): the shared modules a kind builds on.
SHARED = ("app.web.kind", "app.web.step_pages", "app.web.deps", "app.views.screen", "app.views.view_state",
          "app.views.urls", "app.views.story", "app.engine.runtime.compute", "app.engine.jobs.tasks", "app.house")
# what the kinds' code calls its arguments: the compute executor, a request, the app
ALIASES: dict[str, object] = {"compute": ComputeExecutor, "request": Request, "app": FastAPI()}
PLACEHOLDERS = {"YOUR_KIND"}
ADDRESS = re.compile(r"^(?:(?:GET|POST) )?(/\S*)$")
CALL = re.compile(r"^(?:(?P<target>\w+) = )?(?P<name>[\w.]+)\((?P<args>.*)\)(?: -> (?P<returns>\w+))?$")


def _defined_by_the_kind(name: str) -> bool:
    found = re.compile(rf"^\s*(?:def |class )?{re.escape(name)}\b(?:\s*[:=(])", re.MULTILINE)
    return any(found.search(textwrap.dedent(text)) for rel, text in FILES.items() if rel.endswith(".py"))


def _member(cls: type, name: str) -> object | None:
    """A class's attribute, or a dataclass's field (one without a default is no class attribute)."""
    if dataclasses.is_dataclass(cls):
        found = next((f for f in dataclasses.fields(cls) if f.name == name), None)
        if found is not None:
            return found
    return getattr(cls, name, None)


def _resolve(name: str, classes: list[type]) -> object | None:
    """What `name` (`a` or `a.b`) is, or None: a Kind field, an attribute of a class the step names, a
    shared module's name, a builtin, a name the kind defines."""
    head, _, attr = name.partition(".")
    fields = {f.name: f for f in dataclasses.fields(Kind)}
    if not attr and head in fields:
        return fields[head]
    found: object | None = ALIASES.get(head)
    if found is None:
        found = next((_member(c, head) for c in classes if _member(c, head) is not None), None)
    if found is None:
        found = next((getattr(m, head) for m in map(importlib.import_module, SHARED) if hasattr(m, head)), None)
    if found is None:
        found = getattr(builtins, head, None)
    if found is None and _defined_by_the_kind(head):
        found = head
    if found is None or not attr:
        return found
    return _member(found, attr.split(".")[0]) if isinstance(found, type) else getattr(found, attr.split(".")[0], None)


def _check_path(path: str) -> str | None:
    """A path the doc names: the kind's (a role's file, or one the kind writes), else the project's."""
    rel = path.replace("<kind>", ID)
    if rel.startswith(f"app/kinds/{ID}/"):
        rel = rel.removeprefix(f"app/kinds/{ID}/")
        if not rel:
            return None  # the folder itself
    if rel.split("/")[0] in LAYERS:
        kind_file = rel in ROLES or rel in FILES
        kind_folder = rel.endswith("/") and any(f.startswith(rel) for f in FILES)
        return None if kind_file or kind_folder else f"`{path}`: neither a role's file nor one the kind writes"
    real = ROOT / path.replace("<kind>", "toy")  # a folder every kind has: the toy's
    return None if real.exists() else f"`{path}`: no such file in the project"


def problems(text: str) -> list[str]:
    """Each backticked name of a step that is not what it claims to be."""
    from app.views.urls import PATHS_API, PATHS_PANEL, STEP_API, URLS

    tokens = re.findall(r"`([^`]+)`", text)
    classes = [c for t in tokens if isinstance(c := _resolve(t, []), type)]
    house = {a.replace("{walkthrough_id}", "{id}") for a in (STEP_API, PATHS_API, PATHS_PANEL, URLS.home())}
    found: list[str] = []
    for token in tokens:
        if token.startswith("python -m "):
            module = token.split()[2]
            if importlib.util.find_spec(f"{module}.__main__") is None:
                found.append(f"`{token}`: no module {module}.__main__")
        elif (address := ADDRESS.match(token)) is not None:
            if address[1] not in house:
                found.append(f"`{token}`: not an address the house owns ({', '.join(sorted(house))})")
        elif "*" in token:
            if token not in (ROOT / "pyproject.toml").read_text():
                found.append(f"`{token}`: not in pyproject.toml's import contracts")
        elif "/" in token or token.endswith(".toml"):
            if (problem := _check_path(token)) is not None:
                found.append(problem)
        elif (call := CALL.match(token)) is not None:
            named = [call["name"], *(n for n in (call["target"], call["returns"]) if n)]
            named += [n for n in re.findall(r"\b[A-Z]\w*[a-z]\w*\b", call["args"]) if n not in PLACEHOLDERS]
            found += [f"`{token}`: {n} is nothing" for n in named if _resolve(n, classes) is None]
            target = _resolve(call["name"], classes)
            if callable(target):
                known = inspect.signature(target).parameters
                found += [f"`{token}`: {call['name']} takes no {k}" for k in re.findall(r"(\w+)=", call["args"])
                          if k not in known]
        elif re.fullmatch(r"[A-Za-z_][\w.]*", token):
            if _resolve(token, classes) is None:
                found.append(f"`{token}`: neither a field of Kind nor a name the kind or the shared layers define")
        else:
            found.append(f"`{token}`: a name this test cannot read (write it as a name, a path or an address)")
    return found


@pytest.mark.parametrize("number", list(STEPS))
def test_the_names_in_each_step_are_real(number):
    text = doc_steps()[number]
    assert not problems(text), f"step {number} of 'How to add a kind':\n" + "\n".join(problems(text))


def test_the_steps_name_every_role_and_every_field():
    steps = doc_steps()
    named = {n: set(re.findall(r"`([^`]+)`", text)) for n, text in steps.items()}
    assert set(ROLES) <= named[1], f"step 1 lacks the roles' files {sorted(set(ROLES) - named[1])}"
    every = {re.match(r"[\w.]+", t)[0].removeprefix("Kind.") for ts in named.values() for t in ts if t[0].isalpha()}
    fields = {f.name for f in dataclasses.fields(Kind)}
    assert fields <= every, f"no step names the Kind fields {sorted(fields - every)}"
    job_fields = {f.name for f in dataclasses.fields(JobTask)}
    assert job_fields <= named[7], f"step 7 lacks the JobTask fields {sorted(job_fields - named[7])}"
    assert "create_app(settings, kinds=(YOUR_KIND,))" in named[8]


def test_the_name_check_refuses_what_is_not_there():
    assert problems("`step_api`, `web/kind.py`, `Kind.tasks`, `/api/walkthroughs/{id}/step`") == []
    assert len(problems("`step_apis`, `web/kinds.py`, `Kind.task`, `/api/walkthroughs/{id}/steps`, "
                        "`create_app(settings, kind=(YOUR_KIND,))`")) == 5


# -- the walk, then the kind served --------------------------------------------------------------------


PROJECT_FILES = ("app", "templates", "static", "walkthroughs", "pyproject.toml")  # what a kind might be tempted to edit


def _git_status() -> str | None:
    """The project's changed and untracked source files; None where the project is no git checkout. (Not the
    whole checkout: other tests running beside this one write their outputs into it.)"""
    found = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", *PROJECT_FILES], cwd=ROOT,
                           capture_output=True, text=True)
    return found.stdout if found.returncode == 0 else None


@pytest.fixture
def walk(tmp_path, monkeypatch):
    """The kind's modules forgotten after (its app's templates, static files and words for nodes are that app's
    own: app.state.context)."""
    yield Walk(tmp_path, monkeypatch)
    for name in [m for m in sys.modules if m == ID or m.startswith(f"{ID}.")]:
        del sys.modules[name]


def test_a_kind_added_by_the_docs_steps_is_served(walk):
    before = _git_status()
    for step in STEPS.values():  # in the doc's order
        step(walk)
    client = walk.client
    assert client is not None
    # its step page: the shared page with its screen's lead
    page = client.get("/walkthroughs/coin/steps/flip?p=0.3")
    assert page.status_code == 200 and 'id="coin-flip"' in page.text and ">0.3000</output>" in page.text
    assert "Heads pays, so one GRPO step makes heads more likely." in page.text
    assert 'href="/api/walkthroughs/coin/step?p=0.3"' in page.text
    assert client.get("/walkthroughs/coin/steps/flip?p=0.5").headers["location"] == "/walkthroughs/coin/steps/flip"
    assert client.get("/walkthroughs/coin/steps/flip?p=2").status_code == 422
    # its step JSON at the house's address, its own typed `p`, its strict query
    step = client.get("/api/walkthroughs/coin/step?p=0.3")
    body = step.json()
    assert step.status_code == 200 and body["kind"] == "coin" and body["p"] == 0.3
    assert body["probs"] == pytest.approx([0.3, 0.7]) and body["p_after"] > 0.3 and body["grad"] < 0
    bad = client.get("/api/walkthroughs/coin/step?p=2")
    assert bad.status_code == 422 and bad.json()["detail"][0]["param"] == "p", bad.text
    unknown = client.get("/api/walkthroughs/coin/step?zz=1")
    assert unknown.status_code == 422 and "zz" in unknown.json()["error"], unknown.text
    assert client.get("/api/walkthroughs/toy_grpo/step").status_code == 409  # view-only here
    # its old address, its own route, its stylesheet
    moved = client.get("/api/walkthroughs/coin/coin?p=0.3")
    assert moved.status_code == 308 and moved.headers["location"] == "/api/walkthroughs/coin/step?p=0.3"
    assert client.get("/api/walkthroughs/coin/faces").json() == {
        "faces": ["heads", "tails"], "step": "/api/walkthroughs/coin/step"}
    assert client.get("/api/walkthroughs/toy_grpo/faces").status_code == 409
    assert client.get("/static/coin/coin.css").status_code == 200
    # the document: one step operation, with its `p`
    operation = client.get("/openapi.json").json()["paths"]["/api/walkthroughs/{walkthrough_id}/step"]["get"]
    (p,) = [q for q in operation["parameters"] if q["name"] == "p"]
    assert "probability of heads" in p["description"]
    assert "/api/walkthroughs/{walkthrough_id}/faces" in client.get("/openapi.json").json()["paths"]
    assert _git_status() == before, "adding a kind changed a file of the project"
