"""Naming parents concurrently cannot make a cycle (attacker pass, issue 42): A's parent B and B's
parent A asked at the same moment. The cycle check read the lineage before any lock, so both passed
and both were written; now the team's row is locked first and the second sees the first's parent."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.services import artifact_parent_set, artifact_register
from governance.core.errors import ApplicationError
from tests.conftest import Personas
from tests.deployments.conftest import catalog, digest_of  # noqa: F401  (shared fixture)


def _artifact(personas: Personas, name: str) -> ModelArtifact:
    return artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": name,
            "source_repo": f"org/{name}",
            "revision": "r1",
            "weights_digest": digest_of(name),
            "license": "apache-2.0",
            "architecture_key": "llama-3.1-8b",
        },
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("catalog")
def test_two_parents_named_at_once_never_make_a_cycle(personas: Personas, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _artifact(personas, "tiny-a"), _artifact(personas, "tiny-b")
    lineage = ModelArtifact.lineage

    def slow_lineage(self: ModelArtifact) -> list[ModelArtifact]:
        found = lineage(self)
        time.sleep(0.5)  # widen the window between the check and the write
        return found

    monkeypatch.setattr(ModelArtifact, "lineage", slow_lineage)
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def name(child: ModelArtifact, parent: ModelArtifact) -> None:
        try:
            start.wait()
            artifact_parent_set(
                artifact=child, parent=parent, derivation=Derivation.FINE_TUNE, actor=personas.requester
            )
            outcomes.append("set")
        except ApplicationError as exc:
            outcomes.append(str(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=name, args=pair) for pair in ((a, b), (b, a))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(outcomes, key=lambda o: o != "set")[0] == "set"
    assert outcomes.count("set") == 1, outcomes
    a.refresh_from_db()
    b.refresh_from_db()
    assert not (a.parent_id == b.pk and b.parent_id == a.pk)
