"""The response models of app/web/schemas match the bodies the API really sends, and /openapi.json names them.

Every model forbids extra keys, so a key added to (or dropped from) a builder without
its model fails here. Bodies are validated as received: the routes never validate them.
The document itself is checked too: real bodies against its JSON schemas (schemathesis).
"""
from __future__ import annotations

import json
from typing import Union

import pytest
import requests
import schemathesis
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter
from runs import start_default_runs
from snapshots import other_snapshot

from app.house import create_app
from app.kinds.toy.web.schemas.compare import CompareBody
from app.kinds.toy.web.schemas.processes import ComparisonBody, ProcessesBody, ProcessRunBody
from app.kinds.toy.web.schemas.tensors import InactiveRecord, TensorRecord, TensorsBody
from app.runs.web.run_upload_schemas import RunUploadBody
from app.web.schemas.errors import ErrorBody, NotStartedBody, ParamError, ValidationErrorBody
from app.web.schemas.health import HealthBody, ReadyBody
from app.web.schemas.jobs import PathJobBody
from app.web.schemas.walkthroughs import UploadBody, WalkthroughItem, WalkthroughSummary
from app.web.settings import PROJECT_ROOT, Settings

SEED = PROJECT_ROOT / "walkthroughs" / "toy_grpo.tensorviz.json"
TENSORS = "/api/walkthroughs/toy_grpo/step"
STEP = "/api/walkthroughs/{walkthrough_id}/step"  # one operation for every kind (app/web/routes/kind_routes.py)
COMPARE = "/api/walkthroughs/toy_grpo/compare"
REF = "#/components/schemas/"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    client = TestClient(create_app(Settings(uploads_dir=tmp_path_factory.mktemp("uploads"))))
    start_default_runs(client.app)  # as `python -m app` does at start-up: the default paths' runs
    return client


@pytest.fixture(scope="module")
def openapi(client) -> dict:
    return client.get("/openapi.json").json()


def validated(response, status: int, model):
    """The body as `model` (a model, or e.g. list[Model]); raises on any key or type it does not declare."""
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"].startswith("application/json")
    return TypeAdapter(model).validate_python(response.json())


# -- 200 bodies -------------------------------------------------------------------------

def test_healthz(client):
    assert HealthBody.model_validate(client.get("/healthz").json()) == HealthBody(status="ok")


def test_walkthrough_list_and_summary(client):
    items = validated(client.get("/api/walkthroughs"), 200, list[WalkthroughItem])
    assert "toy_grpo" in {i.id for i in items}
    summary = validated(client.get("/api/walkthroughs/toy_grpo"), 200, WalkthroughSummary)
    assert summary.steps and summary.nodes and summary.edges and summary.modules
    assert summary.opening_step in {s.id for s in summary.steps}


@pytest.mark.parametrize("query, kind, history", [
    ("", "grpo", "StepHistory"),
    ("?step=clip", "grpo", "StepHistory"),
    ("?node=ratio", "grpo", "StepHistory"),
    ("?rewards=1,1,1,1", "grpo", "StepHistory"),
    ("?process=r1&stage=cold-start", "sft", "SFTStageHistory"),
    ("?process=r1&stage=cold-start&prompt=5", "sft", "SFTStageHistory"),  # no pair: `output` inactive
    ("?process=distillation&stage=curate", "rejection_sampling", "SamplingStageHistory"),
    ("?process=distillation&stage=student-sft", "sft", "SFTStageHistory"),
    ("?process=r1-zero", "grpo", "GRPOStageHistory"),
])
def test_tensors(client, query, kind, history):
    response = client.get(TENSORS + query)
    body = validated(response, 200, TensorsBody)
    assert body.kind == kind and type(body.history).__name__ == history
    assert ("process" in body.model_fields_set) == ("process=" in query)
    sent = response.json()
    # `exclude_unset` gives back exactly the keys sent: nothing is defaulted in
    assert body.model_dump(mode="json", exclude_unset=True).keys() == sent.keys()
    # stage steps other than GRPO mark the nodes they do not use inactive
    assert any(isinstance(r, InactiveRecord) for r in body.nodes.values()) == (kind != "grpo")


def test_tensors_records_as_sent(client):
    """A tensor record and an inactive record, key for key."""
    body = client.get(TENSORS + "?process=distillation&stage=curate").json()
    inactive = body["nodes"]["ratio"]
    assert set(inactive) == set(InactiveRecord.model_fields) and inactive["inactive"] is True
    assert set(body["nodes"]["policy"]) == set(TensorRecord.model_fields)
    assert body["parameter_grads"] == {}


def test_processes(client):
    listed = validated(client.get("/api/processes"), 200, ProcessesBody)
    assert {p.id for p in listed.processes} == {"r1-zero", "r1", "distillation"}
    run = validated(client.get("/api/processes/r1?seed=0"), 200, ProcessRunBody)
    assert run.seed == 0 and [s.id for s in run.stages] == [s.id for s in listed.processes[1].stages]
    compared = validated(client.get("/api/processes/compare"), 200, ComparisonBody)
    assert compared.seed == 0 and len(compared.processes) == 3


def test_upload(client):
    raw = SEED.read_bytes()
    first = client.post("/api/walkthroughs", files={"file": ("toy.json", raw, "application/json")})
    again = client.post("/api/walkthroughs", files={"file": ("toy.json", raw, "application/json")})
    assert validated(first, 201, UploadBody) == validated(again, 200, UploadBody)


# -- error bodies -----------------------------------------------------------------------

@pytest.mark.parametrize("url, status, model", [
    ("/api/walkthroughs/nope", 404, ErrorBody),
    ("/api/walkthroughs/nope/step", 404, ErrorBody),
    (TENSORS + "?node=nope", 404, ErrorBody),
    (TENSORS + "?process=r1&stage=x", 404, ErrorBody),
    ("/api/processes/nope", 404, ErrorBody),
    (TENSORS + "?group_size=1", 422, ValidationErrorBody),
    (TENSORS + "?stage=x", 422, ValidationErrorBody),
    (TENSORS + "?learning_rate=10&beta=10&iteration=50&inner_steps=16", 422, ValidationErrorBody),  # diverges
    ("/api/processes/r1?seed=-1", 422, ValidationErrorBody),
    ("/api/processes/compare?iterations_scale=x", 422, ValidationErrorBody),
])
def test_error_bodies(client, url, status, model):
    body = validated(client.get(url), status, model)
    if status == 422:
        assert body.detail and body.error.startswith(body.detail[0].param)


def test_upload_refusals(client):
    bad = client.post("/api/walkthroughs", files={"file": ("x.json", b"{}", "application/json")})
    validated(bad, 422, ErrorBody)
    validated(client.post("/api/walkthroughs"), 422, ValidationErrorBody)  # no `file` part
    huge = client.post("/api/walkthroughs", files={"file": ("x.json", b" " * (2 * 1024 * 1024 + 1))})
    validated(huge, 413, ErrorBody)


def test_view_only_409(client):
    raw = json.dumps(other_snapshot()).encode()
    upload = validated(client.post("/api/walkthroughs", files={"file": ("other.json", raw)}), 201, UploadBody)
    assert upload.runnable is False
    validated(client.get(f"/api/walkthroughs/{upload.id}"), 200, WalkthroughSummary)
    validated(client.get(f"/api/walkthroughs/{upload.id}/step"), 409, ErrorBody)


def test_busy_503(tmp_path):
    app = create_app(Settings(uploads_dir=tmp_path, compute_slots=1, compute_queue=0, response_cache_mb=0))
    busy = TestClient(app)
    with app.state.context.limiter:  # the one slot taken, no waiting line: an uncached step is refused at once
        response = busy.get(TENSORS + "?seed=918273")
    validated(response, 503, ErrorBody)
    assert response.headers["retry-after"] == "1"


def test_models_forbid_drift():
    """The guard every test above relies on: an unknown key fails validation."""
    with pytest.raises(ValueError):
        HealthBody.model_validate({"status": "ok", "extra": 1})
    with pytest.raises(ValueError):  # an inactive record must not carry numbers
        InactiveRecord.model_validate({"inactive": True, "reason": "r", "shape": [1], "dtype": None,
                                       "values": None, "grad": None})


# -- the OpenAPI document -----------------------------------------------------------------

def schema_of(openapi: dict, path: str, status: str, method: str = "get") -> dict:
    return openapi["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]


def ref(model: type[BaseModel]) -> str:
    return REF + model.__name__


OK = [
    ("/healthz", "get", "200", HealthBody),
    ("/readyz", "get", "200", ReadyBody),
    ("/api/walkthroughs/{walkthrough_id}", "get", "200", WalkthroughSummary),
    ("/api/walkthroughs/{walkthrough_id}/compare", "get", "200", CompareBody),
    ("/api/walkthroughs", "post", "201", UploadBody),
    ("/api/walkthroughs", "post", "200", UploadBody),
    ("/api/runs", "post", "201", RunUploadBody),  # a run sent as one archive
    ("/api/runs", "post", "200", RunUploadBody),
    ("/api/processes", "get", "200", ProcessesBody),
    ("/api/processes/{process_id}", "get", "200", ProcessRunBody),
    ("/api/processes/compare", "get", "200", ComparisonBody),
]


@pytest.mark.parametrize("path, method, status, model", OK)
def test_openapi_names_each_body(openapi, path, method, status, model):
    schema = schema_of(openapi, path, status, method)
    assert schema["$ref"] == ref(model)
    # only the model: no `type: object, additionalProperties: true` left over from `-> dict`
    assert set(schema) <= {"$ref", "title"}
    assert openapi["components"]["schemas"][model.__name__]["additionalProperties"] is False


def test_openapi_walkthrough_list(openapi):
    assert schema_of(openapi, "/api/walkthroughs", "200") == {
        "type": "array", "items": {"$ref": ref(WalkthroughItem)},
        "title": "Response 200 List Walkthroughs Api Walkthroughs Get"}


ERRORS = [  # every GET operation of the document, with the error bodies it declares
    ("/healthz", {}),
    ("/readyz", {"503": ReadyBody}),  # still warming up
    ("/api/walkthroughs", {"422": ValidationErrorBody}),  # an unknown query parameter
    ("/api/processes", {"422": ValidationErrorBody}),
    ("/api/walkthroughs/{walkthrough_id}", {"404": ErrorBody, "422": ValidationErrorBody}),
    # every kind's step: a toy's and the real model's 404 may name the POST that starts the run; a job's 202
    (STEP, {"202": PathJobBody, "404": (ErrorBody, NotStartedBody), "409": ErrorBody, "422": ValidationErrorBody,
            "503": ErrorBody}),
    ("/api/walkthroughs/{walkthrough_id}/compare", {"404": ErrorBody, "409": ErrorBody, "422": ValidationErrorBody,
                                                    "503": ErrorBody}),
    ("/api/processes/{process_id}", {"404": NotStartedBody, "422": ValidationErrorBody, "503": ErrorBody}),
    ("/api/schemas/step-record", {"422": ValidationErrorBody}),
    ("/api/runs/{run_id}", {"404": ErrorBody, "422": ValidationErrorBody}),  # the run explorer's JSON
    ("/api/runs/{run_id}/diff", {"404": ErrorBody, "422": ValidationErrorBody, "503": ErrorBody}),  # two steps
    ("/api/runs/compare", {"422": ValidationErrorBody}),  # 2 to 8 runs; an unknown id is a 422 naming `run`
    ("/api/processes/compare", {"404": NotStartedBody, "422": ValidationErrorBody, "503": ErrorBody}),
    # a job: 202 while queued or running, with the same body as its 200
    ("/api/walkthroughs/{walkthrough_id}/paths/{path}", {"202": PathJobBody, "404": NotStartedBody, "409": ErrorBody,
                                                         "422": ValidationErrorBody, "503": ErrorBody}),
]


def test_every_get_operation_is_listed(openapi):
    assert {p for p, ops in openapi["paths"].items() if "get" in ops} == {p for p, _ in ERRORS}


@pytest.mark.parametrize("path, errors", ERRORS)
def test_openapi_error_bodies(openapi, path, errors):
    responses = openapi["paths"][path]["get"]["responses"]
    assert set(responses) == {"200", *errors}
    for status, model in errors.items():
        expected = ({"$ref": ref(model)} if not isinstance(model, tuple) else
                    {"anyOf": [{"$ref": ref(m)} for m in model]})
        assert {k: v for k, v in schema_of(openapi, path, status).items() if k != "title"} == expected, status
    if "503" in errors:
        assert "Retry-After" in responses["503"]["headers"]


def test_openapi_upload_errors(openapi):
    assert schema_of(openapi, "/api/walkthroughs", "413", "post") == {"$ref": ref(ErrorBody)}
    refused = schema_of(openapi, "/api/walkthroughs", "422", "post")["anyOf"]
    assert refused == [{"$ref": ref(ErrorBody)}, {"$ref": ref(ValidationErrorBody)}]


def test_openapi_422_is_the_apps_body(openapi):
    """The app's handler replaces FastAPI's validation body, and so does the document."""
    detail = openapi["components"]["schemas"]["ValidationErrorBody"]
    assert detail["required"] == ["error", "detail"]
    assert detail["properties"]["detail"]["items"] == {"$ref": ref(ParamError)}
    for path, ops in openapi["paths"].items():
        for op in ops.values():
            assert "HTTPValidationError" not in json.dumps(op.get("responses", {})), path
    assert "HTTPValidationError" not in openapi["components"]["schemas"]


DOCUMENTED = [  # (path in the document, URL): GET bodies checked against the document itself
    ("/healthz", "/healthz"),
    ("/readyz", "/readyz"),
    ("/api/walkthroughs", "/api/walkthroughs"),
    ("/api/walkthroughs/{walkthrough_id}", "/api/walkthroughs/toy_grpo"),
    ("/api/walkthroughs/{walkthrough_id}", "/api/walkthroughs/nope"),
    (STEP, TENSORS),
    (STEP, TENSORS + "?step=clip&rewards=1,0,0,1"),
    (STEP, TENSORS + "?process=r1&stage=cold-start&prompt=5"),
    (STEP, TENSORS + "?process=distillation&stage=curate"),
    (STEP, TENSORS + "?process=r1-zero"),
    (STEP, TENSORS + "?group_size=1"),
    (STEP, TENSORS + "?node=nope"),
    ("/api/walkthroughs/{walkthrough_id}/compare", COMPARE),
    ("/api/walkthroughs/{walkthrough_id}/compare", COMPARE + "?step=clip&vs_preset=trl"),
    ("/api/walkthroughs/{walkthrough_id}/compare", COMPARE + "?rewards=1,1,1,1&beta=0&vs_beta=0.04"),
    ("/api/walkthroughs/{walkthrough_id}/compare", COMPARE + "?vs_beta=11"),
    ("/api/processes", "/api/processes"),
    ("/api/processes/{process_id}", "/api/processes/r1?seed=0"),
    ("/api/processes/{process_id}", "/api/processes/nope"),
    ("/api/processes/compare", "/api/processes/compare"),
    ("/api/processes/compare", "/api/processes/compare?seed=-1"),
    ("/api/walkthroughs/{walkthrough_id}/paths/{path}", "/api/walkthroughs/toy_grpo/paths/r1?seed=0"),
    ("/api/walkthroughs/{walkthrough_id}/paths/{path}", "/api/walkthroughs/tiny_lm_grpo/paths/r1?scale=5"),
]


@pytest.fixture(scope="module")
def document(openapi):
    return schemathesis.openapi.from_dict(openapi)


@pytest.mark.parametrize("path, url", DOCUMENTED)
def test_document_describes_real_bodies(client, openapi, document, path, url):
    response = client.get(url)
    assert str(response.status_code) in openapi["paths"][path]["get"]["responses"], url
    document[path]["GET"].validate_response(response)  # raises, naming the mismatch


def test_document_catches_drift(client, document):
    """The check above is not vacuous: the same body with one key more fails it."""
    sent = client.get(COMPARE + "?node=ratio")
    drifted = schemathesis.Response(
        status_code=200, headers={"content-type": ["application/json"]},
        content=json.dumps({**sent.json(), "extra": 1}).encode(),
        request=requests.Request("GET", str(sent.request.url)).prepare(), elapsed=0.0, verify=True)
    operation = document["/api/walkthroughs/{walkthrough_id}/compare"]["GET"]
    assert operation.is_valid_response(sent)
    assert not operation.is_valid_response(drifted)


def test_the_step_operation_names_each_kinds_body(openapi):
    """One address for every kind's step (issue 51): its 200 is the toy's TensorsBody, the real model's job
    (PathJobBody), or a kind's JSON no model states yet (StepJSON, open); each kind's own model stays strict."""
    refs = {s["$ref"] for s in schema_of(openapi, STEP, "200")["anyOf"]}
    assert refs == {ref(TensorsBody), ref(PathJobBody), REF + "StepJSON"}
    assert openapi["components"]["schemas"]["TensorsBody"]["additionalProperties"] is False
    assert schema_of(openapi, STEP, "200", "post") == {"$ref": ref(PathJobBody)}  # only the real model's step starts


# Real 404 and 422 bodies of every GET operation, checked against the model its document
# entry names (and, through schemathesis, against the document itself).
REAL_ERRORS = [
    ("/api/walkthroughs", "/api/walkthroughs?page=2", 422),
    ("/api/walkthroughs/{walkthrough_id}", "/api/walkthroughs/nope", 404),
    ("/api/walkthroughs/{walkthrough_id}", "/api/walkthroughs/toy_grpo?step=clip", 422),  # no `step` here
    (STEP, "/api/walkthroughs/nope/step", 404),
    (STEP, TENSORS + "?step=nope", 404),
    (STEP, TENSORS + "?process=nope", 404),
    (STEP, TENSORS + "?group_size=1", 422),
    (STEP, TENSORS + "?stage=x", 422),
    (STEP, TENSORS + "?clip_eps=0.9", 422),
    (STEP,
     TENSORS + "?learning_rate=10&beta=10&iteration=50&inner_steps=16", 422),  # diverges
    ("/api/walkthroughs/{walkthrough_id}/compare", COMPARE + "?node=nope", 404),
    ("/api/walkthroughs/{walkthrough_id}/compare", COMPARE + "?vs_beta=11", 422),
    ("/api/walkthroughs/{walkthrough_id}/compare", COMPARE + "?vs_seed=1", 422),
    (STEP, "/api/walkthroughs/tiny_lm_grpo/step?node=nope", 404),
    (STEP, "/api/walkthroughs/tiny_lm_grpo/step?group_size=17", 422),
    ("/api/processes", "/api/processes?seed=1", 422),
    ("/api/schemas/step-record", "/api/schemas/step-record?version=2", 422),
    ("/api/runs/{run_id}", "/api/runs/0123456789abcdef", 404),
    ("/api/runs/{run_id}", "/api/runs/0123456789abcdef?zz=1", 422),  # an unknown parameter, before the lookup
    ("/api/runs/{run_id}/diff", "/api/runs/0123456789abcdef/diff?a=1&b=2", 404),
    ("/api/runs/{run_id}/diff", "/api/runs/0123456789abcdef/diff?a=x", 422),  # not a number, before the lookup
    ("/api/runs/compare", "/api/runs/compare?run=0123456789abcdef", 422),  # one run: too few to compare
    (STEP, "/api/walkthroughs/nope/step", 404),
    (STEP, "/api/walkthroughs/toy_grpo/step?group=-1", 422),
    ("/api/processes/{process_id}", "/api/processes/nope", 404),
    ("/api/processes/{process_id}", "/api/processes/r1?seed=-1", 422),
    ("/api/processes/{process_id}", "/api/processes/r1?stage=sft", 422),
    ("/api/processes/compare", "/api/processes/compare?iterations_scale=9", 422),
    ("/api/processes/compare", "/api/processes/compare?scale=2", 422),
    ("/api/processes/compare", "/api/processes/compare?seed=77", 404),  # not started: a GET never starts it
    ("/api/processes/{process_id}", "/api/processes/r1?seed=77", 404),
    ("/api/walkthroughs/{walkthrough_id}/paths/{path}", "/api/walkthroughs/toy_grpo/paths/r1?seed=77", 404),
    (STEP, TENSORS + "?process=r1&seed=77", 404),
    ("/api/walkthroughs/{walkthrough_id}/paths/{path}", "/api/walkthroughs/toy_grpo/paths/ppo", 404),
    ("/api/walkthroughs/{walkthrough_id}/paths/{path}", "/api/walkthroughs/toy_grpo/paths/r1?iterations_scale=9", 422),
    (STEP, "/api/walkthroughs/smollm_grpo/step?seed=77", 404),
    (STEP, "/api/walkthroughs/smollm_grpo/step?group_size=99", 422),
]
MODELS = {ref(m): m for m in (ErrorBody, ValidationErrorBody, NotStartedBody)}


def test_every_declared_404_and_422_is_exercised(openapi):
    declared = {(path, status) for path, ops in openapi["paths"].items() if "get" in ops
                for status in ops["get"]["responses"] if status in ("404", "422")}
    assert declared == {(path, str(status)) for path, _, status in REAL_ERRORS}


@pytest.mark.parametrize("path, url, status", REAL_ERRORS)
def test_real_error_bodies_follow_the_declared_model(client, openapi, document, path, url, status):
    schema = schema_of(openapi, path, str(status))
    refs = [s["$ref"] for s in schema["anyOf"]] if "anyOf" in schema else [schema["$ref"]]
    model = MODELS[refs[0]] if len(refs) == 1 else Union[tuple(MODELS[r] for r in refs)]  # noqa: UP007
    body = validated(client.get(url), status, model)
    if isinstance(body, ValidationErrorBody):
        assert body.detail and body.error.startswith(body.detail[0].param)
    document[path]["GET"].validate_response(client.get(url))
