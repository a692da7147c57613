"""The parallel layouts a plan may take (tp x pp x ep x dp), and why none is valid when the request
fixes some of them. Rules from the deployment guides: TP stays inside a node, PP carries the
cross-node split, EP stays inside the NVLink domain, DP replicates.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from planner.memory import Layout
from planner.specs import ModelSpec

if TYPE_CHECKING:
    from planner.plan import PlanRequest

MAX_GPUS = 256
MAX_DP = 32  # replicas the search considers (a fixed dp may be more)


def _powers(limit: int) -> list[int]:
    values, value = [], 1
    while value <= limit:
        values.append(value)
        value *= 2
    return values


def candidate_layouts(request: PlanRequest, spec: ModelSpec) -> list[Layout]:
    return list(_candidate_layouts(request.tp, request.pp, request.ep, request.dp, request.gpus_per_node, spec))


@functools.lru_cache(maxsize=4096)
def _candidate_layouts(
    fixed_tp: int | None,
    fixed_pp: int | None,
    fixed_ep: int | None,
    fixed_dp: int | None,
    gpus_per_node: int,
    spec: ModelSpec,
) -> tuple[Layout, ...]:
    layouts = []
    for tp in [fixed_tp] if fixed_tp else _powers(gpus_per_node):
        for pp in [fixed_pp] if fixed_pp else _powers(16):
            if pp > 1 and tp < gpus_per_node and fixed_pp is None:
                continue  # PP carries the cross-node split: fill a node with TP first
            # Powers of two here; plan() adds the replica count between two of them that the
            # concurrency needs (3 replicas when 2 hold too few sequences), and a fixed dp is any number.
            for dp in [fixed_dp] if fixed_dp else _powers(MAX_DP):
                if tp * pp * dp > MAX_GPUS or pp > spec.num_layers:
                    continue
                ep_options = [1] if not spec.is_moe else sorted({1, tp, tp * dp})
                if dp & (dp - 1) and spec.n_routed_experts % (tp * dp):
                    ep_options.remove(tp * dp)  # experts shared across replicas only where they divide evenly
                for ep in [fixed_ep] if fixed_ep else ep_options:
                    layout = Layout(tp=tp, pp=pp, ep=ep, dp=dp)
                    try:
                        layout.validate(spec)
                    except ValueError:
                        continue
                    if ep > gpus_per_node and ep > tp:
                        continue  # EP stays inside the NVLink domain
                    layouts.append(layout)
    return tuple(layouts)


def no_layout(request: PlanRequest, spec: ModelSpec) -> str:
    """Which rule the fixed tp/pp/ep/dp break, and the nearest layout that is valid."""
    fixed = {name: getattr(request, name) for name in ("tp", "pp", "ep", "dp") if getattr(request, name)}
    given = " ".join(f"{name}={value}" for name, value in fixed.items())
    layout = Layout(tp=request.tp or 1, pp=request.pp or 1, ep=request.ep or 1, dp=request.dp or 1)
    try:
        layout.validate(spec)
        rule = f"at most {MAX_GPUS} GPUs, and EP stays inside one node ({request.gpus_per_node} GPUs)"
    except ValueError as exc:
        rule = str(exc) + (" (this model is dense)" if "MoE" in str(exc) else "")
    suggestion = ""
    for free in (("ep",), ("ep", "dp"), ("ep", "dp", "pp"), ("tp", "pp", "ep", "dp")):  # keep as much as possible
        cleared: dict[str, Any] = dict.fromkeys(free)
        found = candidate_layouts(dataclasses.replace(request, **cleared), spec)
        if found:
            best = min(found, key=lambda l: (l.gpus, -l.tp))  # noqa: E741
            suggestion = f"; try tp={best.tp} pp={best.pp} ep={best.ep} dp={best.dp}"
            break
    return f"tp/pp/ep/dp: no valid layout for {given}: {rule}{suggestion}"
