"""What ships describes itself (issue 42), end to end on the embedded default's local executor: a
location registered through the API queues an inspection job (planner.inspectjob run as a real
subprocess of the job path), its report becomes the artifact's precision and license evidence, and
readiness checks the request against it. The license texts come from Debian's
/usr/share/common-licenses at test time, never from a copy in the repository."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from governance.approvals.models import Authority
from governance.artifacts.models import ArtifactSignature, Derivation, ModelArtifact
from governance.artifacts.services import artifact_register
from governance.deployments.models import DeploymentRequest
from governance.evaluations.inspections import artifact_inspection_request
from governance.evaluations.local import CHECKOUT
from governance.evaluations.models import ArtifactInspection, ArtifactLocation, Cluster, ExecutorKind, JobRun
from governance.licenses.models import LicenseText
from planner.manifest import digest_of_manifest, manifest_lines
from tests.conftest import ROOT, Personas
from tests.deployments.conftest import SERVING, Flow
from tests.evaluations.conftest import drive, testcluster  # noqa: F401  (shared fixture)

pytestmark = pytest.mark.django_db

LICENSES = Path("/usr/share/common-licenses")
TINY = ROOT / "planner" / "tinylm" / "checkpoint"
W4A16 = ROOT / "planner" / "tinylm" / "derivatives" / "w4a16-rtn"
CARD = "---\nlicense: {license}\nbase_model: org/tiny-llama\nbase_model_relation: {relation}\n---\n# Tiny\n"


@pytest.fixture
def models(tmp_path: Path, settings: Any) -> Path:
    settings.JOB_POLL_INITIAL_S = 0.2
    settings.JOB_POLL_MAX_S = 0.5
    root = tmp_path / "models"
    root.mkdir()
    Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        python=sys.executable,
        remote_root=str(tmp_path / "jobs"),
        model_roots=[str(root)],
        setup_lines=f"export PYTHONPATH={CHECKOUT} OMP_NUM_THREADS=1",
        default_time_limit_s=300,
    )
    return root


def _checkpoint(
    models: Path, name: str, source: Path = TINY, license_file: str | None = "Apache-2.0", card: str | None = None
) -> Path:
    directory = models / name
    shutil.copytree(source, directory)
    if license_file:
        (directory / "LICENSE").write_text((LICENSES / license_file).read_text())
    if card:
        (directory / "README.md").write_text(card)
    return directory


def _digest(directory: Path) -> str:
    return digest_of_manifest(manifest_lines(directory))


def _register(personas: Personas, directory: Path, license_key: str, **extra: Any) -> ModelArtifact:
    return artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": directory.name,
            "source_repo": f"org/{directory.name}",
            "revision": "r1",
            "weights_digest": _digest(directory),
            "license": license_key,
            "architecture_key": "llama-3.1-8b",
            **extra,
        },
    )


def _submitted(flow: Flow, artifact: ModelArtifact) -> str:
    code = flow.create(artifact, serving_plan={**SERVING, "precision": "bf16"})["code"]
    assert flow.post(flow.p.requester, code, "submit").status_code == 200
    return str(code)


def _locate_and_inspect(
    personas: Personas, artifact: ModelArtifact, directory: Path, capture: Any
) -> ArtifactInspection:
    """Register the location through the API as the requester would; the inspection job it queues
    runs on the local executor (submit and poll driven here, as the Celery tasks chain them)."""
    cluster = Cluster.objects.get(name="local")
    response = personas.client(personas.requester).post(
        f"/api/v1/clusters/{cluster.code}/locations",
        {"artifact": str(artifact.code), "path": str(directory)},
        format="json",
    )
    assert response.status_code == 201, response.json()
    inspection = ArtifactInspection.objects.filter(artifact=artifact).latest("created_at")
    assert inspection.job is not None
    with capture(execute=True):
        run = drive(inspection.job, timeout_s=120)
    assert run.state == "succeeded", run.reason + run.log_tail
    inspection.refresh_from_db()
    return inspection


def test_a_bf16_checkpoint_with_the_apache_text_matches_apache(
    personas: Personas, catalog: None, models: Path, django_capture_on_commit_callbacks: Any, org_pki: Authority
) -> None:
    directory = _checkpoint(models, "tiny-apache", card=CARD.format(license="apache-2.0", relation="finetune"))
    artifact = _register(personas, directory, "apache-2.0")

    inspection = _locate_and_inspect(personas, artifact, directory, django_capture_on_commit_callbacks)

    assert inspection.status == "passed", inspection.reason
    assert inspection.weights_digest == artifact.weights_digest
    # the files the node read are signed (OpenSSF model-signing; tests/artifacts/test_model_signing.py)
    assert ArtifactSignature.objects.get(artifact=artifact).source == "inspection"
    assert (inspection.precision or {})["key"] == "bf16"
    body = personas.client(personas.requester).get(f"/api/v1/artifacts/{artifact.code}/inspections").json()
    assert body["weights"]["source"] == "inspection"
    [license_file] = body["results"][0]["license_files"]
    assert license_file["path"] == "LICENSE"
    assert license_file["matches"].startswith("apache-2.0 ")
    assert body["results"][0]["model_card"]["license"] == "apache-2.0"
    # the organisation keeps the text it relied on, once
    assert LicenseText.objects.get(fingerprint=license_file["fingerprint"]).text.startswith(
        (LICENSES / "Apache-2.0").read_text()[:40]
    )


def test_the_apache_text_registered_as_llama_is_a_license_mismatch(
    flow: Flow, personas: Personas, models: Path, django_capture_on_commit_callbacks: Any
) -> None:
    directory = _checkpoint(models, "tiny-mislabelled")
    artifact = _register(personas, directory, "llama-3.1")
    _locate_and_inspect(personas, artifact, directory, django_capture_on_commit_callbacks)
    code = _submitted(flow, artifact)

    blockers = {b["code"]: b for b in flow.get(personas.legal, code)["blockers"]}

    assert "license.mismatch" in blockers, blockers
    assert "apache-2.0" in blockers["license.mismatch"]["message"]
    assert "llama-3.1" in blockers["license.mismatch"]["message"]
    assert blockers["license.mismatch"]["role"] == "legal"


def test_an_unknown_text_blocks_until_legal_classifies_it_then_the_next_artifact_matches(
    flow: Flow, personas: Personas, models: Path, django_capture_on_commit_callbacks: Any
) -> None:
    """The Apache text with its appendix filled in (as checkpoints ship it) is another text: legal
    classifies it once; the next checkpoint carrying it matches without anyone asking."""
    filled = (LICENSES / "Apache-2.0").read_text().replace("[yyyy] [name of copyright owner]", "2025 Acme Labs")
    first = _checkpoint(models, "tiny-filled-1", license_file=None)
    (first / "LICENSE").write_text(filled)
    artifact = _register(personas, first, "apache-2.0")
    _locate_and_inspect(personas, artifact, first, django_capture_on_commit_callbacks)
    code = _submitted(flow, artifact)
    blockers = {b["code"]: b for b in flow.get(personas.legal, code)["blockers"]}
    assert "license.unidentified" in blockers
    fingerprint = next(
        f["fingerprint"]
        for f in (DeploymentRequest.objects.get(code=code).evidence or {})["artifact"]["inspection"]["license_files"]
    )

    # The request page shows what the files say; the text's page shows it with the classify form.
    from django.test import Client

    web = Client()
    web.force_login(personas.legal)
    page = web.get(f"/requests/{code}/").content.decode()
    assert f'data-fingerprint="{fingerprint}"' in page
    assert "not classified" in page
    text_page = web.get(f"/licenses/texts/{fingerprint}")
    assert text_page.status_code == 200
    assert "2025 Acme Labs" in text_page.content.decode()
    assert 'name="license"' in text_page.content.decode()
    requester_web = Client()
    requester_web.force_login(personas.requester)
    assert requester_web.get(f"/licenses/texts/{fingerprint}").status_code in (403, 404)

    # Only legal classifies; the texts list is not a requester's.
    url = f"/api/v1/licenses/texts/{fingerprint}"
    assert personas.client(personas.requester).post(
        f"{url}/classify", {"license": "apache-2.0"}, format="json"
    ).status_code in (403, 404)
    detail = personas.client(personas.legal).get(url).json()
    assert filled[:30] in detail["text"]
    with django_capture_on_commit_callbacks(execute=True):
        classified = personas.client(personas.legal).post(
            f"{url}/classify",
            {"license": "apache-2.0", "note": "Apache 2.0 with the appendix filled in"},
            format="json",
        )
    assert classified.status_code == 200, classified.json()
    assert classified.json()["classified_as"].startswith("apache-2.0 ")
    # the request re-evaluated on the classification
    assert "license.unidentified" not in [b["code"] for b in flow.get(personas.legal, code)["blockers"]]

    second = _checkpoint(models, "tiny-filled-2", license_file=None)
    (second / "LICENSE").write_text(filled)
    (second / "generation_config.json").write_text('{"do_sample": false}')  # other weights, same text
    other = _register(personas, second, "apache-2.0")
    _locate_and_inspect(personas, other, second, django_capture_on_commit_callbacks)
    later = _submitted(flow, other)
    codes = [b["code"] for b in flow.get(personas.legal, later)["blockers"]]
    assert "license.unidentified" not in codes
    assert "license.mismatch" not in codes


def test_gpl_registered_as_apache_and_no_license_at_all_are_findings_for_legal(
    flow: Flow, personas: Personas, models: Path, django_capture_on_commit_callbacks: Any
) -> None:
    gpl = _checkpoint(models, "tiny-gpl", license_file="GPL-3")
    artifact = _register(personas, gpl, "apache-2.0")
    _locate_and_inspect(personas, artifact, gpl, django_capture_on_commit_callbacks)
    code = _submitted(flow, artifact)
    assert "license.unidentified" in [b["code"] for b in flow.get(personas.legal, code)["blockers"]]

    bare = _checkpoint(models, "tiny-bare", license_file=None)
    unlicensed = _register(personas, bare, "apache-2.0")
    _locate_and_inspect(personas, unlicensed, bare, django_capture_on_commit_callbacks)
    code = _submitted(flow, unlicensed)
    blockers = {b["code"]: b for b in flow.get(personas.legal, code)["blockers"]}
    assert blockers["license.file_missing"]["role"] == "legal"


def test_a_card_naming_another_license_beside_the_apache_text_is_a_finding(
    flow: Flow, personas: Personas, models: Path, django_capture_on_commit_callbacks: Any
) -> None:
    directory = _checkpoint(models, "tiny-card", card=CARD.format(license="llama3.1", relation="finetune"))
    artifact = _register(personas, directory, "apache-2.0")
    _locate_and_inspect(personas, artifact, directory, django_capture_on_commit_callbacks)
    code = _submitted(flow, artifact)
    messages = [b["message"] for b in flow.get(personas.legal, code)["blockers"] if b["code"] == "license.mismatch"]
    assert any("llama3.1" in message for message in messages), messages


def test_a_changed_byte_in_license_is_named_by_the_inspection_on_the_node(
    personas: Personas, catalog: None, models: Path, django_capture_on_commit_callbacks: Any
) -> None:
    directory = _checkpoint(models, "tiny-changed")
    artifact = _register(personas, directory, "apache-2.0")
    _locate_and_inspect(personas, artifact, directory, django_capture_on_commit_callbacks)
    location = ArtifactLocation.objects.get(artifact=artifact)
    assert location.manifest  # computed on registration: the node can name the file that differs
    text = (directory / "LICENSE").read_bytes()
    (directory / "LICENSE").write_bytes(text[:100] + (b"X" if text[100:101] != b"X" else b"Y") + text[101:])
    assert _digest(directory) != artifact.weights_digest

    inspection = artifact_inspection_request(location=location, actor=personas.requester)
    with django_capture_on_commit_callbacks(execute=True):
        assert inspection.job_id is not None
        drive(JobRun.objects.get(pk=inspection.job_id), timeout_s=120)
    inspection.refresh_from_db()

    assert inspection.status == "refused"
    assert inspection.refused_file == "LICENSE", inspection.reason


def test_the_quantize_jobs_w4a16_derivative_is_read_as_w4a16_and_refused_as_bf16(
    flow: Flow, personas: Personas, models: Path, django_capture_on_commit_callbacks: Any
) -> None:
    """The scenario of the issue on the committed w4a16 derivative's real files: no config or
    quantization_config typed at registration; the inspection reads both from the files."""
    parent_dir = _checkpoint(models, "tiny-base")
    parent = _register(personas, parent_dir, "apache-2.0")
    directory = _checkpoint(models, "tiny-w4a16", source=W4A16)
    derivative = _register(personas, directory, "apache-2.0", derivation=Derivation.QUANTIZE, parent=parent)
    inspection = _locate_and_inspect(personas, derivative, directory, django_capture_on_commit_callbacks)
    assert (inspection.precision or {})["key"] == "w4a16", inspection.precision

    code = flow.create(derivative, serving_plan={**SERVING, "precision": "bf16"})["code"]
    refused = flow.post(personas.requester, code, "submit")
    assert refused.status_code == 400
    assert "w4a16" in str(refused.json()["extra"]["fields"]["serving_plan.precision"])


@pytest.mark.cluster
def test_the_inspection_runs_on_the_slurm_node_over_ssh(
    personas: Personas,
    catalog: None,
    testcluster: dict[str, Any],  # noqa: F811 - the shared fixture
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The same reading through sshd + Slurm: sbatch over SSH, the node's own python, the report back
    over SFTP. The operator registers the manifest (the service cannot hash files on a remote node)."""
    import sysconfig
    import tempfile

    settings.JOB_POLL_INITIAL_S = 0.5
    settings.JOB_POLL_MAX_S = 1.0
    # the cluster's account reads the models: a world-readable place, not tmp_path
    shared = Path(tempfile.mkdtemp(prefix="gov-inspect-", dir="/var/tmp"))
    shared.chmod(0o755)
    try:
        models = shared / "models"
        models.mkdir()
        directory = _checkpoint(models, "tiny-w4a16", source=W4A16)
        for path in [shared, *shared.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        cluster = Cluster.objects.create(
            name="testcluster",
            host=testcluster["host"],
            port=testcluster["port"],
            user=testcluster["user"],
            host_keys=testcluster["known_hosts_text"],
            key_path=testcluster["key_path"],
            remote_root=testcluster["remote_root"],
            partition=testcluster["partition"],
            model_roots=[str(models)],
            default_time_limit_s=300,
            python="/usr/bin/python3",
            setup_lines=f"export PYTHONPATH={ROOT}:{sysconfig.get_paths()['purelib']} OMP_NUM_THREADS=1",
        )
        artifact = _register(personas, directory, "apache-2.0")
        response = personas.client(personas.requester).post(
            f"/api/v1/clusters/{cluster.code}/locations",
            {"artifact": str(artifact.code), "path": str(directory), "manifest": "".join(manifest_lines(directory))},
            format="json",
        )
        assert response.status_code == 201, response.json()
        inspection = ArtifactInspection.objects.get(artifact=artifact)
        assert inspection.job is not None
        with django_capture_on_commit_callbacks(execute=True):
            run = drive(inspection.job, timeout_s=180)
        assert run.state == "succeeded", run.reason + run.log_tail
        inspection.refresh_from_db()
        assert inspection.status == "passed", inspection.reason
        assert (inspection.precision or {})["key"] == "w4a16"
        [license_file] = (inspection.report or {})["license_files"]
        assert LicenseText.objects.get(fingerprint=license_file["fingerprint"])
    finally:
        shutil.rmtree(shared, ignore_errors=True)
