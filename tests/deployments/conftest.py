"""Fixtures: the license catalog, artifacts of several licenses, and a helper to drive requests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from governance.artifacts.models import ModelArtifact
from governance.artifacts.services import artifact_register
from governance.capacity.services import capacity_plan_compute
from governance.deployments import services as deployment_services
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import latest_capacity_plan
from governance.evaluations.models import Cluster, EvalKind, EvalRun, EvalStatus, ExecutorKind
from governance.licenses.services import license_catalog_load
from tests.conftest import Personas
from tests.licenses.helpers import BASE_FACTS

# The licenses tests' benign facts, as a hosted commercial product with 2M users.
FACTS: dict[str, Any] = {
    **BASE_FACTS,
    "hosted_service": True,
    "monthly_active_users": 2_000_000,
    "monthly_revenue": {"amount": 1_000_000, "currency": "USD"},
}
SERVING: dict[str, Any] = {
    "engine": "vllm",
    "precision": "fp8",
    "gpu": "h200",
    "max_model_len": 32768,
    "concurrency": 4,
}
# Served without quantizing the weights: no quantization eval is needed (the readiness rule's list).
UNQUANTIZED = ("bf16",)


def record_eval(code: str, scheme: str, status: str = EvalStatus.PASSED) -> EvalRun:
    """A finished eval run as the cluster job leaves it (the job itself is covered by the eval
    tests); the deployments hook then makes it evidence, as after a real run."""
    cluster, _ = Cluster.objects.get_or_create(
        name="local", defaults={"executor": ExecutorKind.LOCAL, "remote_root": "/tmp/governance-test-runs"}
    )
    bound = 0.02 if status == EvalStatus.PASSED else 0.31
    deployment = DeploymentRequest.objects.get(code=code)
    layout = ((deployment.evidence or {}).get("capacity_plan") or {}).get("result", {}).get("parallel") or {}
    evaluation = EvalRun.objects.create(
        request=deployment,
        cluster=cluster,
        scheme=scheme,
        status=status,
        # served: the request's own weights through the engine and layout the plan names
        kind=EvalKind.SERVED,
        candidate=deployment.artifact,
        candidate_digest=deployment.artifact.weights_digest,
        engine=deployment.serving_plan.get("engine", "vllm"),
        engine_version="0.11.0",
        serving={"precision": scheme, **{n: layout.get(n, 1) for n in ("tp", "pp", "ep", "dp")}},
        summary={"pass": status == EvalStatus.PASSED, "overall": {"n": 400, "upper_bound_95": bound}},
        eval_set_sha256="e" * 64,
    )
    deployment_services.on_eval_finished(evaluation=evaluation)
    return evaluation


def ensure_passed_eval(code: str) -> None:
    """A quantized serving plan needs a passed eval of its precision before anyone may sign."""
    deployment = DeploymentRequest.objects.get(code=code)
    precision = deployment.serving_plan["precision"]
    if precision in UNQUANTIZED:
        return
    if not EvalRun.objects.filter(
        request=deployment, scheme=precision, status=EvalStatus.PASSED, kind=EvalKind.SERVED
    ).exists():
        record_eval(code, precision)


def digest_of(name: str) -> str:
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()


@pytest.fixture
def catalog(db: None) -> None:
    license_catalog_load(actor="system:test")


@pytest.fixture
def artifacts(personas: Personas, catalog: None) -> dict[str, ModelArtifact]:
    def register(name: str, license_key: str, arch: str, **extra: Any) -> ModelArtifact:
        data = {
            "name": name,
            "source_repo": f"org/{name}",
            "revision": "abc123",
            "weights_digest": digest_of(name),
            "license": license_key,
            "architecture_key": arch,
            **extra,
        }
        return artifact_register(actor=personas.requester, team=personas.team, data=data)

    return {
        "kimi": register("Kimi-K2-Instruct", "kimi-k2-modified-mit", "kimi-k2"),
        "qwen": register("Qwen2.5-72B-Instruct", "qwen", "qwen3-30b-a3b"),
        "llama": register("Llama-3.1-70B", "llama-3.1", "qwen3-30b-a3b"),
        "apache": register("Qwen3-30B-A3B", "apache-2.0", "qwen3-30b-a3b"),
    }


class Flow:
    """Drives one request through the API as the personas would."""

    def __init__(self, personas: Personas, pki: Callable[[], object] | None = None) -> None:
        self.p = personas
        self._pki = pki

    def ensure_pki(self) -> None:
        """Build the organisation's PKI the first time this test signs (its RSA keys are pooled,
        but issuing the root, the TSA and the CRL still costs each test that builds it): a test
        that never signs never builds it. `approve` calls it; a test that posts a review that is
        to be recorded (not refused first) calls it before."""
        if self._pki is not None:
            self._pki()

    def client(self, user: User | None) -> APIClient:
        return self.p.client(user)

    def create(self, artifact: ModelArtifact, facts: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        body = {
            "artifact": str(artifact.code),
            "product_name": "Acme Assistant",
            "environments": ["production"],
            "facts": facts or FACTS,
            "serving_plan": SERVING,
            **extra,
        }
        response = self.client(self.p.requester).post("/api/v1/deployments/", body, format="json")
        assert response.status_code == 201, response.json()
        return response.json()

    def post(self, user: User, code: str, action: str, body: dict[str, Any] | None = None) -> Any:
        return self.client(user).post(f"/api/v1/deployments/{code}/{action}", body or {}, format="json")

    def get(self, user: User, code: str) -> dict[str, Any]:
        response = self.client(user).get(f"/api/v1/deployments/{code}")
        assert response.status_code == 200, response.json()
        return response.json()

    def compute_capacity(self, code: str) -> None:
        """Compute the request's plan and run the hook that makes it evidence (after commit in
        production; these tests run inside one transaction)."""
        stored = latest_capacity_plan(DeploymentRequest.objects.get(code=code))
        assert stored is not None
        computed = capacity_plan_compute(plan_id=stored.pk)
        deployment_services.on_capacity_plan_computed(plan=computed)

    def to_review(self, artifact: ModelArtifact, facts: dict[str, Any] | None = None) -> str:
        code = self.create(artifact, facts)["code"]
        assert self.post(self.p.requester, code, "submit").status_code == 200
        assert self.post(self.p.legal, code, "start-review").status_code == 200
        return code

    def meet_obligations(self, code: str, how_met: str = "footer of every page") -> None:
        for item in self.get(self.p.requester, code)["obligations"]:
            if item["status"] in ("open", "rejected"):
                r = self.post(
                    self.p.requester,
                    code,
                    f"obligations/{item['code']}/acknowledge",
                    {"how_met": how_met},
                )
                assert r.status_code == 200, r.json()
        for item in self.get(self.p.legal, code)["obligations"]:
            if item["status"] == "acknowledged":
                r = self.post(self.p.legal, code, f"obligations/{item['code']}/review", {"accept": True})
                assert r.status_code == 200, r.json()

    def approve(self, code: str) -> dict[str, Any]:
        """Drive the request to approved, with the brief packet layout (tests.approvals.conftest.
        run_packet_jobs): a test that reads the packet uses SignFlow.approve_signed instead."""
        self.ensure_pki()
        self.compute_capacity(code)
        ensure_passed_eval(code)
        self.meet_obligations(code)
        digest = self.get(self.p.legal, code)["evidence_digest"]
        for user in (self.p.legal, self.p.engineer):
            body = {"verdict": "approve", "evidence_digest": digest, "password": f"pw-{user.username}"}
            response = self.post(user, code, "review", body)
            assert response.status_code == 202, response.json()
        from tests.approvals.conftest import run_packet_jobs

        run_packet_jobs(code, brief=True)  # the heavy worker's part: render and sign the packet
        return self.get(self.p.legal, code)


@pytest.fixture
def flow(personas: Personas, artifacts: dict[str, ModelArtifact], request: pytest.FixtureRequest) -> Flow:
    """Reviews are signatures: the organisation's PKI (`org_pki`) is built when the test first
    signs through the flow (`approve`, or `ensure_pki` before a review it posts). A test that signs
    another way (a browser form, a bare client) takes `org_pki` itself."""
    return Flow(personas, pki=lambda: request.getfixturevalue("org_pki"))
