"""Who may move a request on from its status, and where to: the transitions people take
(choices.TRANSITIONS also holds the ones nobody chooses: approval and rejection follow the sign-offs,
expiry is beat's, a return to review follows changed evidence). The web's action list asks
available_transitions, the lifecycle services ask require_move before they move a request, so the
page never offers what the service refuses (django-oscar's available_statuses)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from governance.core.errors import PermissionDeniedError
from governance.core.roles import Role, has_role
from governance.deployments.choices import TERMINAL, ReviewRole, Status
from governance.deployments.models import DeploymentRequest


class Move(StrEnum):
    SUBMIT = "submit"
    WITHDRAW = "withdraw"
    START_REVIEW = "start_review"
    REVOKE = "revoke"


# Each move: (the statuses it leaves, the status it reaches). tests/deployments/test_moves.py holds
# every pair to choices.TRANSITIONS.
MOVES: dict[Move, tuple[tuple[str, ...], str]] = {
    Move.SUBMIT: ((Status.DRAFT,), Status.SUBMITTED),
    Move.WITHDRAW: ((Status.DRAFT, Status.SUBMITTED), Status.WITHDRAWN),
    Move.START_REVIEW: ((Status.SUBMITTED,), Status.IN_REVIEW),
    Move.REVOKE: ((Status.APPROVED,), Status.REVOKED),
}
# Reviewer moves: the roles that may take them; nobody takes one on their own request.
_REVIEWER_ROLES = {
    Move.START_REVIEW: (Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER),
    Move.REVOKE: (Role.LEGAL_REVIEWER, Role.ADMIN),
}


def refusal(move: Move, deployment: DeploymentRequest, user: Any, *, member: bool, lead: bool) -> str | None:
    """Why `user` may not take `move` on this request whatever its status (None: they may). `member`:
    the user is in the request's team; `lead`: they lead it."""
    own = user.pk == deployment.requester_id
    if move == Move.SUBMIT:
        return None if has_role(user, Role.REQUESTER) and member else "only a requester of the owning team can do this"
    if move == Move.WITHDRAW:
        allowed = lead or (own and member)
        return None if allowed else "only the request's requester or a lead of its team can withdraw it"
    roles = _REVIEWER_ROLES[move]
    if not has_role(user, *roles):
        return f"this needs the role {' or '.join(roles)}"
    return "nobody reviews their own request (separation of duties)" if own else None


def _member(deployment: DeploymentRequest, user: Any) -> bool:
    return bool(deployment.team.members.filter(pk=user.pk).exists())


def _lead(deployment: DeploymentRequest, user: Any) -> bool:
    return bool(user.led_teams.filter(pk=deployment.team_id).exists())


def available_transitions(
    deployment: DeploymentRequest, user: Any, *, member: bool | None = None, lead: bool | None = None
) -> dict[Move, str]:
    """The moves `user` may take on the request now, with the status each reaches. `member` and `lead`
    when the caller already knows them (the request page annotates membership); else queried, and only
    where a move from this status needs them."""
    moves: dict[Move, str] = {}
    for move, (sources, target) in MOVES.items():
        if deployment.status not in sources:
            continue
        if move in (Move.SUBMIT, Move.WITHDRAW) and member is None:
            member = _member(deployment, user)
        if move == Move.WITHDRAW and lead is None:
            lead = _lead(deployment, user)
        if refusal(move, deployment, user, member=bool(member), lead=bool(lead)) is None:
            moves[move] = target
    return moves


def require_move(deployment: DeploymentRequest, user: Any, move: Move) -> None:
    """Refuse (403) a user who may not take `move` on this request; the status is checked by the
    transition itself (409)."""
    lead = move == Move.WITHDRAW and _lead(deployment, user)
    member = move in (Move.SUBMIT, Move.WITHDRAW) and not lead and _member(deployment, user)
    reason = refusal(move, deployment, user, member=member, lead=lead)
    if reason is not None:
        raise PermissionDeniedError(reason)


@dataclass(frozen=True, slots=True)
class Phase:
    """What a page shows of a request for its status, so that pages ask rather than compare it."""

    drafting: bool  # a draft: no reviewers and no blockers yet
    in_review: bool  # sign-offs are taken (and may be signing in the background)
    ended: bool  # a terminal status: nothing more happens to it
    blockers_shown: bool  # what stands between it and approval: gone once approved unless flagged again


def lifecycle_phase(deployment: DeploymentRequest) -> Phase:
    ended = deployment.status in TERMINAL
    return Phase(
        drafting=deployment.status == Status.DRAFT,
        in_review=deployment.status == Status.IN_REVIEW,
        ended=ended,
        blockers_shown=not ended and (deployment.status != Status.APPROVED or deployment.flagged),
    )


def available_actions(deployment: DeploymentRequest, user: Any, *, member: bool | None = None) -> dict[str, Any]:
    """Every form a page may offer `user` on this request: the moves (available_transitions) and
    the actions that do not move it. The services check again; this only hides what they refuse.
    `review_roles`: the ReviewRole values the user may sign as; `eval_form`: an eval may be run now."""
    if member is None:
        member = _member(deployment, user)
    requester = has_role(user, Role.REQUESTER) and member
    own = user.pk == deployment.requester_id
    moves = available_transitions(deployment, user, member=member)
    phase = lifecycle_phase(deployment)
    review_roles: list[str] = []
    if not own and phase.in_review:
        review_roles += [ReviewRole.LEGAL] if has_role(user, Role.LEGAL_REVIEWER) else []
        review_roles += [ReviewRole.ENGINEERING] if has_role(user, Role.ENGINEERING_REVIEWER) else []
    run_eval = has_role(user, Role.ENGINEERING_REVIEWER, Role.ADMIN)
    legal = not own and has_role(user, Role.LEGAL_REVIEWER)
    return {
        "submit": Move.SUBMIT in moves,
        "withdraw": Move.WITHDRAW in moves,
        "acknowledge": requester and not phase.ended,
        "usage": requester and not phase.drafting and not phase.ended,
        "start_review": Move.START_REVIEW in moves,
        "accept_obligations": legal,
        "waive": legal,
        "review_roles": review_roles,
        "run_eval": run_eval,
        "eval_form": run_eval and not phase.drafting,  # a draft's serving plan may still change
        "revoke": Move.REVOKE in moves,
    }
