"""Quantize runs in the service: who may ask, what is refused (naming the field), and registration of
the derivative with its lineage and the parent license's derivative terms, exactly once."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.services import artifact_register
from governance.evaluations.models import ArtifactLocation, Cluster, ExecutorKind, JobRun, JobRunState
from governance.licenses.services import license_catalog_load
from governance.quantization.models import QuantizeRun, QuantizeStatus
from governance.quantization.services import quantize_run_complete
from planner.evaljob.manifest import ArtifactMismatch, verify_artifact
from planner.manifest import manifest as quantjob_manifest
from planner.manifest import manifest_digest
from tests.conftest import Personas

CHECKPOINT = Path(__file__).resolve().parents[2] / "planner" / "tinylm" / "checkpoint"
ROOT = "/srv/models"


@pytest.fixture
def parent(personas: Personas) -> ModelArtifact:
    license_catalog_load(actor="system:test")
    return artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "Llama-tiny",
            "source_repo": "planner/tinylm",
            "revision": "local",
            "weights_digest": manifest_digest(CHECKPOINT),
            "license": "llama-3.1",
            "config": json.loads((CHECKPOINT / "config.json").read_text()),
        },
    )


@pytest.fixture
def cluster(db: None, quantize_python: str) -> Cluster:
    return Cluster.objects.create(
        name="local", executor=ExecutorKind.LOCAL, remote_root="/srv/jobs", model_roots=[ROOT], python=quantize_python
    )


def ask(personas: Personas, user: Any, parent: ModelArtifact, **change: Any) -> Any:
    body = {
        "parent": str(parent.code),
        "cluster": "local",
        "recipe": "w4a16-gptq",
        "name": "Llama-tiny-w4a16",
        "model_path": f"{ROOT}/tiny",
        **change,
    }
    return personas.client(user).post("/api/v1/quantize", body, format="json")


def finish(run: QuantizeRun, **result_change: Any) -> QuantizeRun:
    """The job's end as the executor records it: a succeeded JobRun with the payload's result.json."""
    assert run.job is not None
    result = {
        "name": run.derivative_name,
        "checkpoint": run.output_path,
        "manifest_digest": "sha256:" + "ab" * 32,
        "parent_digest": run.parent.weights_digest,
        "recipe": run.recipe,
        "calibration": {"used": True, "sha256": "cd" * 32, "samples": 128},
        "quantization_config": {"quant_method": "compressed-tensors"},
        "config": {**json.loads((CHECKPOINT / "config.json").read_text()), "quantization_config": {}},
        "versions": {"llmcompressor": "0.14.0.1", "compressed_tensors": "0.19.0"},
        **result_change,
    }
    run.job.state, run.job.result = JobRunState.SUCCEEDED, result
    run.job.save()
    return quantize_run_complete(run_id=run.pk)


def test_only_a_requester_of_the_parents_team_asks(personas: Personas, parent: ModelArtifact, cluster: Cluster) -> None:
    assert ask(personas, personas.engineer, parent).status_code == 403
    assert ask(personas, personas.outsider, parent).status_code == 403
    # Another team's requester does not even see the parent.
    answer = ask(personas, personas.other_requester, parent)
    assert answer.status_code == 400
    assert "parent" in json.dumps(answer.json())
    assert ask(personas, personas.requester, parent).status_code == 202


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"recipe": "w3a3"}, "recipe"),
        ({"name": "../../etc"}, "name"),
        ({"model_path": "/etc/passwd"}, "model_path"),
        ({"model_path": f"{ROOT}/../keys"}, "model_path"),
        ({"cluster": "nowhere"}, "cluster"),
        ({"calibration_path": "/home/secret.jsonl"}, "calibration_path"),
        ({"distribution": "everyone"}, "distribution"),
        ({"name": "Llama-tiny\u202e61a4w"}, "U+202E"),  # issue 43: printed in the packet, so no bidi override
    ],
)
def test_bad_input_is_refused_naming_the_field(
    personas: Personas, parent: ModelArtifact, cluster: Cluster, change: dict[str, Any], field: str
) -> None:
    answer = ask(personas, personas.requester, parent, **change)
    assert answer.status_code == 400, answer.content
    assert field in json.dumps(answer.json()), answer.json()
    assert not QuantizeRun.objects.exists()


def test_the_job_ships_the_recipe_as_data_and_a_fresh_output_path(
    personas: Personas, parent: ModelArtifact, cluster: Cluster
) -> None:
    body = ask(personas, personas.requester, parent).json()
    run = QuantizeRun.objects.get(code=body["code"])
    spec = json.loads(run.job.files["spec.json"])  # type: ignore[union-attr]
    assert spec["recipe"]["modifiers"][0] == {
        "type": "GPTQModifier",
        "targets": ["Linear"],
        "scheme": "W4A16",
        "ignore": ["lm_head", "re:.*mlp.gate$"],
    }
    assert spec["parent_digest"] == parent.weights_digest
    assert spec["output_dir"].startswith(f"{ROOT}/derivatives/Llama-tiny-w4a16-")
    assert run.job.command[1:3] == ["-m", "planner.quantjob"]  # type: ignore[union-attr]


def test_finished_job_registers_the_derivative_with_lineage_once(
    personas: Personas, parent: ModelArtifact, cluster: Cluster
) -> None:
    run = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"])
    run = finish(run)
    assert run.status == QuantizeStatus.REGISTERED
    derivative = run.derivative
    assert derivative is not None
    assert derivative.parent == parent
    assert derivative.derivation == Derivation.QUANTIZE
    assert derivative.weights_digest == "sha256:" + "ab" * 32
    assert derivative.quantization_config is not None
    assert derivative.quantization_config["recipe"]["name"] == "w4a16-gptq"
    assert run.calibration is not None
    assert run.tool_versions is not None
    assert run.license_findings is not None
    assert run.calibration["sha256"] == "cd" * 32
    assert run.tool_versions["llmcompressor"] == "0.14.0.1"
    assert parent.license in {v.license for v in derivative.license_versions()}
    codes = {(f["code"], f["severity"]) for f in run.license_findings}
    assert ("naming.prefix", "obligation") in codes  # the rule is on the derivative, kept
    assert not run.flagged
    # A second delivery of the job's end changes nothing.
    assert quantize_run_complete(run_id=run.pk).derivative == derivative
    assert ModelArtifact.objects.filter(parent=parent).count() == 1
    shown = personas.client(personas.engineer).get(f"/api/v1/quantize/{run.code}").json()
    assert shown["derivative"] == str(derivative.code)
    assert shown["output_path"] == run.output_path


def test_a_llama_derivative_not_named_llama_is_flagged_before_review(
    personas: Personas, parent: ModelArtifact, cluster: Cluster
) -> None:
    run = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent, name="tiny-w4").json()["code"])
    run = finish(run)
    assert run.status == QuantizeStatus.REGISTERED
    assert run.flagged
    assert run.license_findings is not None
    blockers = [f for f in run.license_findings if f["severity"] == "blocker"]
    assert [f["code"] for f in blockers] == ["naming.prefix"]
    assert blockers[0]["params"]["prefix"] == "Llama"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"parent_digest": "sha256:" + "00" * 32}, "parent_digest"),
        ({"manifest_digest": "md5:x"}, "manifest_digest"),
        ({"checkpoint": "/srv/models/other"}, "checkpoint"),
        ({"recipe": {"name": "w4a16-rtn"}}, "recipe"),
    ],
)
def test_a_result_that_does_not_check_out_registers_nothing(
    personas: Personas, parent: ModelArtifact, cluster: Cluster, change: dict[str, Any], reason: str
) -> None:
    run = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"])
    run = finish(run, **change)
    assert run.status == QuantizeStatus.FAILED
    assert reason in run.reason
    assert run.derivative is None
    assert not ModelArtifact.objects.filter(parent=parent).exists()


def test_a_failed_job_names_the_refused_scheme(personas: Personas, parent: ModelArtifact, cluster: Cluster) -> None:
    run = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent, recipe="w4a8-gptq").json()["code"])
    assert run.job is not None
    run.job.state = JobRunState.FAILED
    run.job.log_tail = "quantjob: error: scheme w4a8: the installed compressed-tensors has no W4A8 preset\n"
    run.job.save()
    run = quantize_run_complete(run_id=run.pk)
    assert run.status == QuantizeStatus.FAILED
    assert run.reason.startswith("scheme w4a8:")


def test_a_derivative_changed_after_registration_is_caught_naming_the_file(
    personas: Personas, parent: ModelArtifact, cluster: Cluster, tmp_path: Path
) -> None:
    # The node sends the manifest it hashed with the digest; the location keeps it, so the served
    # job's check on the node names the file that changed, not only that the digest differs.
    derivative_dir = tmp_path / "Llama-tiny-w4a16"
    shutil.copytree(CHECKPOINT, derivative_dir)
    (derivative_dir / "recipe.yaml").write_text("w4a16-gptq\n")  # other bytes than the parent's
    lines = "".join(quantjob_manifest(derivative_dir))
    run = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"])
    run = finish(run, manifest_digest=manifest_digest(derivative_dir), manifest=lines)
    assert run.status == QuantizeStatus.REGISTERED
    location = ArtifactLocation.objects.get(artifact=run.derivative, cluster=cluster)
    assert location.manifest == lines
    verify_artifact(derivative_dir, run.manifest_digest, location.manifest, "candidate")  # as registered
    (derivative_dir / "tokenizer_config.json").write_text("{}")  # edited on the cluster afterwards
    with pytest.raises(ArtifactMismatch, match=r"tokenizer_config\.json differs from the registered manifest"):
        verify_artifact(derivative_dir, run.manifest_digest, location.manifest, "candidate")


def test_a_manifest_that_does_not_hash_to_the_digest_registers_nothing(
    personas: Personas, parent: ModelArtifact, cluster: Cluster
) -> None:
    run = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"])
    run = finish(run, manifest=f"{'00' * 32} 1 model.safetensors\n")
    assert run.status == QuantizeStatus.FAILED
    assert "manifest" in run.reason
    assert not ModelArtifact.objects.filter(parent=parent).exists()


def test_a_run_given_another_team_s_checkpoint_never_reports_its_digest(
    personas: Personas, parent: ModelArtifact, cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 43: a quantize run pointed at another team's checkpoint ended with that checkpoint's
    digest in its reason. The node's refusal and the service's check say only that it does not match."""
    from planner.quantjob import recipes
    from planner.quantjob.run import run as quantjob_run

    theirs = tmp_path / "models" / "their-checkpoint"
    shutil.copytree(CHECKPOINT, theirs)
    (theirs / "NOTICE").write_text("another team's weights\n")
    foreign = manifest_digest(theirs)
    spec = {
        "model_path": str(theirs),
        "parent_digest": parent.weights_digest,
        "recipe": recipes.recipe("w4a16-gptq"),
        "output_dir": str(tmp_path / "models" / "out"),
        "output_name": "out",
        "model_roots": [str(tmp_path / "models")],
    }
    with pytest.raises(ValueError, match="parent_digest") as caught:
        quantjob_run(spec, tmp_path / "attempt")
    assert foreign not in str(caught.value)
    assert foreign.removeprefix("sha256:")[:12] not in str(caught.value)
    assert "do not match" in str(caught.value)
    # what the service makes of the job's end: from the node's error line, or from a result naming it
    run = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"])
    assert run.job is not None
    run.job.state = JobRunState.FAILED
    run.job.log_tail = f"quantjob: error: {caught.value}\n"
    run.job.save()
    assert foreign not in quantize_run_complete(run_id=run.pk).reason
    other = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"])
    other = finish(other, parent_digest=foreign)
    assert other.status == QuantizeStatus.FAILED
    assert "parent_digest" in other.reason
    assert foreign not in other.reason


def test_a_derivative_whose_digest_another_team_holds_is_registered_for_its_own_team(
    personas: Personas, parent: ModelArtifact, cluster: Cluster
) -> None:
    """Issue 43: the derivative's digest was looked up across all teams; another team's artifact with
    the same bytes failed the run and named that artifact's code. The lookup is the parent team's."""
    digest = "sha256:" + "ab" * 32  # what `finish` reports
    theirs = artifact_register(
        actor=personas.other_requester,
        team=personas.other_team,
        data={
            "name": "their-copy",
            "source_repo": "elsewhere/tiny",
            "revision": "1",
            "weights_digest": digest,
            "license": "llama-3.1",
            "config": json.loads((CHECKPOINT / "config.json").read_text()),
        },
    )
    run = finish(QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"]))
    assert run.status == QuantizeStatus.REGISTERED, run.reason
    assert run.derivative is not None
    assert run.derivative.team == parent.team
    assert run.derivative.pk != theirs.pk
    # the same bytes again in the parent's own team: refused (a rerun), naming only its own artifact
    rerun = finish(QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"]))
    assert rerun.status == QuantizeStatus.FAILED
    assert str(run.derivative.code) in rerun.reason
    assert str(theirs.code) not in rerun.reason


def test_a_local_interpreter_without_llm_compressor_is_refused_at_submit(
    personas: Personas, parent: ModelArtifact, cluster: Cluster, settings: Any, quantize_python: str
) -> None:
    """It was accepted (202) and failed as `exit code 1 ()`: now a 400 naming the package and the setting."""
    settings.QUANTIZE_PYTHON = ""
    cluster.python = sys.executable  # the web tier's own environment: no llm-compressor in it
    cluster.save()
    answer = ask(personas, personas.requester, parent)
    assert answer.status_code == 400, answer.content
    message = answer.json()["extra"]["fields"]["cluster"][0]
    assert "llm-compressor" in message
    assert "QUANTIZE_PYTHON is not set" in message
    assert not QuantizeRun.objects.exists()
    assert not JobRun.objects.exists()
    settings.QUANTIZE_PYTHON = str(Path(quantize_python).with_name("absent-python"))
    missing = ask(personas, personas.requester, parent)
    assert missing.status_code == 400
    assert "(QUANTIZE_PYTHON) does not run" in missing.json()["extra"]["fields"]["cluster"][0]
    settings.QUANTIZE_PYTHON = quantize_python  # the quantize environment: accepted
    assert ask(personas, personas.requester, parent).status_code == 202


def test_a_cluster_job_without_llm_compressor_fails_naming_the_package(
    personas: Personas, parent: ModelArtifact
) -> None:
    """A Slurm cluster's python is on its nodes: not checked at submit; the failure says what is missing."""
    Cluster.objects.create(
        name="hpc", executor=ExecutorKind.SLURM, host="hpc.example.org", remote_root="/scratch/jobs",
        model_roots=[ROOT], python="/opt/plain/bin/python3",
    )  # fmt: skip
    answer = ask(personas, personas.requester, parent, cluster="hpc")
    assert answer.status_code == 202, answer.content
    run = QuantizeRun.objects.get(code=answer.json()["code"])
    assert run.job is not None
    run.job.state, run.job.reason = JobRunState.FAILED, "exit code 1 ()"
    run.job.log_tail = (
        "Traceback (most recent call last):\n"
        '  File "/scratch/jobs/x/planner/quantjob/run.py", line 94, in quantize\n'
        "    from llmcompressor import oneshot\n"
        "ModuleNotFoundError: No module named 'llmcompressor'\n"
    )
    run.job.save()
    run = quantize_run_complete(run_id=run.pk)
    assert run.status == QuantizeStatus.FAILED
    assert run.reason.startswith("the cluster's python lacks the llm-compressor package"), run.reason
    assert "QUANTIZE_PYTHON" in run.reason


def test_the_requester_who_started_a_quantize_job_reads_its_log(
    personas: Personas, parent: ModelArtifact, cluster: Cluster
) -> None:
    run = QuantizeRun.objects.get(code=ask(personas, personas.requester, parent).json()["code"])
    assert run.job is not None
    run.job.log_tail = "quantjob: calibrating on 128 samples\n"
    run.job.save()
    mine = personas.client(personas.requester).get(f"/api/v1/jobs/{run.job.code}")
    assert mine.status_code == 200, mine.content
    assert mine.json()["log_tail"] == "quantjob: calibrating on 128 samples\n"
    # Another team's requester does not find it (404, nothing of the job in the answer).
    theirs = personas.client(personas.other_requester).get(f"/api/v1/jobs/{run.job.code}")
    assert theirs.status_code == 404
    assert "calibrating" not in theirs.content.decode()
    assert personas.client(personas.engineer).get(f"/api/v1/jobs/{run.job.code}").status_code == 200
