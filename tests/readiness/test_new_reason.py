"""A reason added to the readiness rule applies to approvals already given (docs/gate.md): an approved
request the gate allowed is denied, with the new reason, once the rule finds it wanting; the sign-off
refuses on it too, so re-approving needs the evidence fixed. Pure: built states, no database."""

from __future__ import annotations

import dataclasses
from unittest import mock

from hypothesis import given, settings

from governance.deployments import readiness as rule
from governance.deployments.readiness import (
    SIGNING_ROLES,
    Actor,
    ReadinessState,
    Reason,
    Signature,
    blocks_signing,
    readiness,
)
from governance.gate.conditions import evaluate
from tests.readiness.test_properties import NOW, approved_check, gate_state, states

NEW = Reason("weights.new_rule", "a rule released after this approval finds the weights wanting", "fix it", Actor.LEGAL)


@settings(max_examples=50, deadline=None)
@given(states(settled=True))
def test_a_new_reason_denies_an_approval_already_given(state: ReadinessState) -> None:
    signed = dataclasses.replace(
        state,
        signatures={role: Signature(role, state.evidence_digest) for role in SIGNING_ROLES},
        flagged=False,
        flag_reason="",
    )
    approved = gate_state(signed, "approved")
    check = approved_check(approved)
    assert evaluate(approved, check, NOW) == []  # allowed under the rules it was approved by

    with mock.patch.object(rule, "_weights", return_value=[NEW]):  # the release adds one reason
        assert evaluate(approved, check, NOW) == [NEW]  # the same approval, denied with the new reason
        assert blocks_signing(readiness(signed, NOW)) == [NEW]  # and not approvable again as it is
