"""The team's measured latencies a plan takes from an app above this one (issue 47): the canary app stores the
canary's and the fleet's measured TTFT and TPOT, and a plan of a team's request on a cluster is corrected by
them (planner.measured). This app may not import the canary app (tests/test_layers.py), so the canary app
registers ONE function at start-up (its AppConfig.ready) that answers them. A direct call, not a signal, as
core.visibility's registry: the plan's figures depend on the answer, a registered function that fails raises,
and an answer that is not planner evidence is an error, never a plan made silently without it."""

from __future__ import annotations

from collections.abc import Callable

from planner.measured import MeasuredEvidence

# (team_id=, cluster=, gpu=, engine=, release_line=) -> the team's measurements there, or None
MeasuredFor = Callable[..., MeasuredEvidence | None]

_REGISTERED: list[MeasuredFor] = []  # one function, or none


def register_measured(measured_for: MeasuredFor) -> None:
    """`measured_for(team_id=, cluster=, gpu=, engine=, release_line=)` answers the team's measurements of that
    cluster (its name), GPU, engine (the planner's profile name) and release line, or None."""
    _REGISTERED[:] = [measured_for]


def measured_for(*, team_id: int, cluster: str, gpu: str, engine: str, release_line: str) -> MeasuredEvidence | None:
    """The registered function's answer; None when no app registered one (a deployment without the canary app)."""
    if not _REGISTERED:
        return None
    answer = _REGISTERED[0](team_id=team_id, cluster=cluster, gpu=gpu, engine=engine, release_line=release_line)
    if answer is not None and not isinstance(answer, MeasuredEvidence):
        raise TypeError(f"the measured-latency function answered {type(answer).__name__}, not MeasuredEvidence")
    return answer
