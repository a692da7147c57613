"""The data migration of issue 44: a capacity plan's subject, two strings (a label and a request
code), becomes a foreign key to the request; a what-if plan without a subject keeps none."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)


def _every_app_but_capacity_at(capacity: str) -> list[tuple[str, str]]:
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    return [(app, name) for app, name in leaves if app != "capacity"] + [("capacity", capacity)]


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


def test_each_plans_subject_becomes_its_request() -> None:
    before = _every_app_but_capacity_at("0002_plan_lease")
    after = _every_app_but_capacity_at("0003_plan_deployment_reference")
    executor = _migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        user = old.get_model("auth", "User").objects.create(username="ria")
        team = old.get_model("core", "Team").objects.create(name="search")
        license = old.get_model("licenses", "License").objects.create(
            key="plan-reference-test", name="t", source_url="https://example.org/license"
        )
        version = old.get_model("licenses", "LicenseVersion").objects.create(
            license=license, version="1", effective_date=date(2026, 11, 3)
        )
        artifact = old.get_model("artifacts", "ModelArtifact").objects.create(
            team=team, name="m", source_repo="org/m", revision="r", weights_digest="sha256:" + "b" * 64,
            license=license, license_version=version,
        )  # fmt: skip
        request = old.get_model("deployments", "DeploymentRequest").objects.create(
            team=team, requester=user, artifact=artifact, product_name="p", facts={}, serving_plan={}
        )
        Plan = old.get_model("capacity", "CapacityPlan")
        evidence = Plan.objects.create(
            inputs={}, subject_type="deployments.deploymentrequest", subject_id=str(request.code)
        )
        what_if = Plan.objects.create(inputs={})

        new = _migrate(after).loader.project_state(after).apps
        Plan = new.get_model("capacity", "CapacityPlan")
        assert Plan.objects.get(pk=evidence.pk).deployment_id == request.pk
        assert Plan.objects.get(pk=what_if.pk).deployment_id is None
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # every app at its latest
