"""The moves people take (deployments.moves): each is a transition of choices.TRANSITIONS, and the
request page offers a move exactly when the service would let that user take it."""

from __future__ import annotations

import pytest

from governance.core.errors import PermissionDeniedError
from governance.deployments.choices import TRANSITIONS
from governance.deployments.models import DeploymentRequest
from governance.deployments.moves import MOVES, Move, available_transitions, require_move
from tests.conftest import make_user
from tests.deployments.conftest import Flow


def test_every_move_is_a_transition_of_the_table() -> None:
    for move, (sources, target) in MOVES.items():
        assert sources, move
        for source in sources:
            assert target in TRANSITIONS[source], (move, source, target)


@pytest.mark.parametrize("status", ["draft", "submitted", "in_review", "approved", "withdrawn"])
def test_what_the_page_offers_is_what_the_service_allows(flow: Flow, artifacts: dict, status: str) -> None:
    p = flow.p
    lead = make_user("lead", "requester", team=p.team)
    p.team.leads.add(lead)
    code = flow.create(artifacts["apache"])["code"]
    DeploymentRequest.objects.filter(code=code).update(status=status)
    deployment = DeploymentRequest.objects.get(code=code)
    for user in (p.requester, lead, p.legal, p.engineer, p.other_requester, p.outsider):
        offered = available_transitions(deployment, user)
        for move, (sources, target) in MOVES.items():
            try:
                require_move(deployment, user, move)
                allowed = deployment.status in sources
            except PermissionDeniedError:
                allowed = False
            assert (move in offered) == allowed, (user.username, move)
            if move in offered:
                assert offered[move] == target
    assert Move.WITHDRAW in available_transitions(deployment, lead) or status not in ("draft", "submitted")
