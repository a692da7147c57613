"""The gate's canary stage (issue 45): a high-risk production rollout needs a passed canary
analysis of the same request, weights digest and serving envelope on record."""

from __future__ import annotations

import pytest

from governance.canary.models import CanaryAnalysis, CanaryStatus
from governance.canary.risk import envelope_digest, serving_envelope
from tests.canary.conftest import Rollout

pytestmark = pytest.mark.django_db


def record(rollout: Rollout, status: str, **serving: object) -> CanaryAnalysis:
    envelope = serving_envelope(rollout.serving(**serving))
    return CanaryAnalysis.objects.create(
        deployment=rollout.deployment,
        digest=rollout.digest,
        envelope=envelope,
        envelope_digest=envelope_digest(envelope),
        status=status,
    )


def test_a_w4a16_derivative_goes_to_staging_but_not_to_production_without_a_canary(rollout: Rollout) -> None:
    assert rollout.check("staging")["decision"] == "allow"

    answer = rollout.check("production")

    assert answer["decision"] == "deny"
    assert [r["code"] for r in answer["reasons"]] == ["canary.missing"]
    assert rollout.digest in answer["reasons"][0]["message"]
    assert "pipeline" in answer["reasons"][0]["fix"]


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (CanaryStatus.PENDING, "canary.pending"),
        (CanaryStatus.RUNNING, "canary.pending"),
        (CanaryStatus.INCONCLUSIVE, "canary.pending"),
        (CanaryStatus.FAILED, "canary.failed"),
        (CanaryStatus.ROLLED_BACK, "canary.failed"),
    ],
)
def test_an_unfinished_or_failed_canary_denies_production(rollout: Rollout, status: str, code: str) -> None:
    record(rollout, status)
    assert rollout.codes("production") == [code]
    assert rollout.codes("staging") == []


@pytest.mark.parametrize("status", [CanaryStatus.PASSED, CanaryStatus.PROMOTED])
def test_a_passed_canary_of_the_same_digest_and_envelope_allows_production(rollout: Rollout, status: str) -> None:
    record(rollout, CanaryStatus.FAILED)  # an earlier one failed: the latest decides
    record(rollout, status)
    assert rollout.check("production")["decision"] == "allow"


def test_a_passed_canary_of_another_envelope_does_not_count(rollout: Rollout) -> None:
    record(rollout, CanaryStatus.PASSED, max_model_len=16384)
    # a canary at a shorter context passed; production asks for the approved 32768
    assert rollout.codes("production") == ["canary.missing"]


def test_a_later_failed_canary_supersedes_a_passed_one(rollout: Rollout) -> None:
    record(rollout, CanaryStatus.PASSED)
    record(rollout, CanaryStatus.FAILED)
    assert rollout.codes("production") == ["canary.failed"]


def test_the_gate_reads_the_canary_state_in_one_more_query_and_none_for_staging(rollout: Rollout) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    rollout.check("production")  # warm: the first check of a process may read more (the token's user...)
    with CaptureQueriesContext(connection) as staging:
        rollout.check("staging")
    with CaptureQueriesContext(connection) as production:
        rollout.check("production")
    canary = [q for q in production.captured_queries if "canary_canaryanalysis" in q["sql"]]
    assert len(canary) == 1
    assert not [q for q in staging.captured_queries if "canary_canaryanalysis" in q["sql"]]
    assert len(production.captured_queries) == len(staging.captured_queries) + 1
