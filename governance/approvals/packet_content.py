"""What the approval packet says, in words a legal reader signs under: facts as labelled values
(money with its currency, counts with separators, yes/no, "not stated"), the whole serving envelope
the gate checks, and the summary page. Pure functions of the evidence document; the template
(templates/approvals/packet.html) only lays them out.

Every word is translated in the language active when they run: the packet renders under
`translation.override(<the request's language>)`, so labels are lazy and values call gettext."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from governance.deployments.envelope import approved_envelope
from governance.deployments.readiness import approved_eval


def _not_stated() -> str:
    return _("not stated")


# The threshold an eval run gets unless someone chose a looser or stricter one (EvalRun's default).
DEFAULT_EVAL_THRESHOLD = 0.05

# Each fact as the request wizard asks it, in the wizard's order.
FACT_LABELS: tuple[tuple[str, Any], ...] = (
    ("use_case", gettext_lazy("Use case")),
    ("commercial_entity", gettext_lazy("Commercial entity")),
    ("hosted_service", gettext_lazy("Served to third parties (API, SaaS, app)")),
    ("production", gettext_lazy("Production use")),
    ("monthly_active_users", gettext_lazy("Monthly active users")),
    ("monthly_active_users_at_model_release", gettext_lazy("Monthly active users on the model's release date")),
    ("monthly_revenue", gettext_lazy("Monthly revenue")),
    ("org_country", gettext_lazy("Principal place of business")),
    ("multimodal", gettext_lazy("Multimodal model")),
    ("outputs_used_to_train_other_models", gettext_lazy("Outputs used to train other models")),
    ("derivative", gettext_lazy("Derivative")),
    ("redistributes_original_weights", gettext_lazy("Original weights redistributed")),
    ("intended_uses", gettext_lazy("Intended uses on an acceptable-use list")),
    ("guardrails_removed", gettext_lazy("Safety guardrails removed")),
)
USE_CASES = {
    "external_commercial": gettext_lazy("External commercial"),
    "internal": gettext_lazy("Internal use only"),
    "evaluation": gettext_lazy("Evaluation"),
    "research": gettext_lazy("Research"),
}
DERIVATIVE_KINDS = {
    "fine_tune": gettext_lazy("fine-tune"),
    "quantize": gettext_lazy("quantize"),
    "distill": gettext_lazy("distill"),
    "merge": gettext_lazy("merge"),
}
DISTRIBUTIONS = {
    "none": gettext_lazy("not distributed"),
    "internal": gettext_lazy("distributed inside the company"),
    "public": gettext_lazy("distributed publicly"),
}
DECISIONS = {
    "allowed": gettext_lazy("allowed"),
    "allowed_with_obligations": gettext_lazy("allowed with obligations"),
    "licensor_approval_required": gettext_lazy("licensor approval required"),
    "prohibited": gettext_lazy("prohibited"),
}
ENVELOPE_LABELS = {
    "engine": gettext_lazy("Serving engine"),
    "precision": gettext_lazy("Precision"),
    "gpu": gettext_lazy("GPU"),
    "kv_dtype": gettext_lazy("KV cache type"),
    "tp": gettext_lazy("Tensor parallel (tp)"),
    "pp": gettext_lazy("Pipeline parallel (pp)"),
    "ep": gettext_lazy("Expert parallel (ep)"),
    "max_model_len": gettext_lazy("Context length (tokens)"),
    "gpu_memory_utilization": gettext_lazy("GPU memory utilisation"),
}
# Stored codes the packet prints, in words (the same words as the web UI's labels, so one
# translation serves both; approvals sits below web and cannot import its table).
SEVERITIES = {
    "blocker": gettext_lazy("Blocker"),
    "approval": gettext_lazy("Licensor approval"),
    "obligation": gettext_lazy("Obligation"),
    "info": gettext_lazy("Information"),
}
OBLIGATION_STATUSES = {
    "open": gettext_lazy("Open"),
    "acknowledged": gettext_lazy("Acknowledged, waiting for legal"),
    "accepted": gettext_lazy("Accepted by legal"),
    "rejected": gettext_lazy("Not accepted: answer again"),
    "superseded": gettext_lazy("No longer required"),
}
EVAL_STATUSES = {
    "running": gettext_lazy("Running"),
    "passed": gettext_lazy("Passed"),
    "failed": gettext_lazy("Failed the gate"),
    "error": gettext_lazy("Error"),
}
ROLES = {"legal": gettext_lazy("Legal"), "engineering": gettext_lazy("Engineering")}
# Who acts on a readiness reason (deployments.readiness.Actor), in the web UI's words.
ACTORS = {
    "requester": gettext_lazy("Requester"),
    "legal": gettext_lazy("Legal reviewer"),
    "engineering": gettext_lazy("Engineering reviewer"),
    "nobody": gettext_lazy("Nobody (wait)"),
    "pipeline": gettext_lazy("Pipeline owner"),
}


def word(table: dict[str, Any], code: Any) -> str:
    """A stored code in words from one of the tables above; an unknown code prints as itself."""
    if code is None or code == "":
        return _not_stated()
    return str(table.get(str(code), code))


def format_count(value: Any) -> str:
    if value is None:
        return _not_stated()
    return f"{int(value):,}"


def format_money(value: Any) -> str:
    """`{"amount": 25000000.0, "currency": "USD"}` as `USD 25,000,000.00`."""
    if not isinstance(value, dict) or value.get("amount") is None:
        return _not_stated()
    return f"{value.get('currency') or '?'} {float(value['amount']):,.2f}"


def format_value(value: Any) -> str:
    """Any other evidence value in words: never a Python repr."""
    if value is None or value == "":
        return _not_stated()
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, int | float):
        return f"{value:,}"
    if isinstance(value, list | tuple):
        return _list_sep().join(format_value(item) for item in value) if value else _("none")
    if isinstance(value, dict):
        return "; ".join(f"{key.replace('_', ' ')}: {format_value(item)}" for key, item in value.items())
    return str(value)


def _list_sep() -> str:
    # Translators: the separator between the items of a list in the packet (Chinese uses "、").
    return _(", ")


def _derivative(value: Any) -> str:
    if not isinstance(value, dict):
        return _not_stated()
    kind = str(value.get("kind") or "none")
    if kind == "none":
        return _("none: the weights as published")
    parts = [word(DERIVATIVE_KINDS, kind), word(DISTRIBUTIONS, value.get("distribution") or "none")]
    if value.get("name"):
        parts.append(_("named %(name)s") % {"name": value["name"]})
    return _list_sep().join(parts)


def fact_rows(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) for every fact; those left out read "not stated" (the engine assumed the
    most conservative value, and the findings say so)."""
    rows = []
    for key, label in FACT_LABELS:
        value = facts.get(key)
        if key == "use_case":
            shown = str(USE_CASES.get(str(value), format_value(value)))
        elif key in ("monthly_active_users", "monthly_active_users_at_model_release"):
            shown = format_count(value)
        elif key == "monthly_revenue":
            shown = format_money(value)
        elif key == "derivative":
            shown = _derivative(value)
        elif key == "intended_uses":
            shown = _list_sep().join(str(use).replace("_", " ") for use in value) if value else _("none")
            if value is None:
                shown = _not_stated()
        else:
            shown = format_value(value)
        rows.append((str(label), shown))
    return rows


def envelope_rows(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """Every field the gate compares a rollout with, tp/pp/ep included."""
    envelope = approved_envelope(evidence)
    return [(str(ENVELOPE_LABELS[name]), format_value(value)) for name, value in envelope.items()]


def _obligations(obligations: list[dict[str, Any]]) -> str:
    if not obligations:
        return _("none")
    counts = Counter(str(item.get("status", "open")) for item in obligations)
    total = ngettext("%(count)d obligation", "%(count)d obligations", len(obligations)) % {"count": len(obligations)}
    # Translators: "<n obligations>: <n> <status>, …", e.g. "2 obligations: 1 open, 1 accepted by legal".
    return _("%(total)s: %(counts)s") % {
        "total": total,
        "counts": _list_sep().join(
            f"{n} {word(OBLIGATION_STATUSES, status).lower()}" for status, n in sorted(counts.items())
        ),
    }


GIB = 1024**3


def format_gib(value: Any) -> str:
    """Bytes in binary units, as the planner computes them: 76,558,319,206 bytes is "71.3 GiB"
    (never "71.3 GB" nor "76.6 GB": a signed figure names its unit exactly)."""
    if value is None:
        return _not_stated()
    return f"{int(value) / GIB:,.1f} GiB"


def gpu_count(value: Any) -> str:
    """ "1 GPU", "8 GPUs" (the noun agrees with the count, in every language's plural rule)."""
    if value is None:
        return _not_stated()
    return ngettext("%(count)s GPU", "%(count)s GPUs", int(value)) % {"count": f"{int(value):,}"}


def chart_caption(gpus: int, replicas: int, shown: int, capacity_gib: float) -> str:
    """What the memory chart draws: "one replica of 16 GPUs, of 32 in 2 replicas" (each replica is
    the same), or the deployment's GPUs when it is one replica; the first N when there are more bars
    than it draws."""
    replica_gpus = max(gpus // max(replicas, 1), 1)
    values = {"gpus": gpus, "replica": replica_gpus, "replicas": replicas, "shown": shown}
    if replicas > 1:
        text = ngettext(
            "Memory of each GPU of one replica of %(replica)s GPU, of %(gpus)s GPUs in %(replicas)s identical replicas",
            "Memory of each GPU of one replica of %(replica)s GPUs, of %(gpus)s GPUs in %(replicas)s identical replicas",
            replica_gpus,
        )
    else:
        text = ngettext(
            "Memory of each GPU of the deployment's %(gpus)s GPU",
            "Memory of each GPU of the deployment's %(gpus)s GPUs",
            gpus,
        )
    text = text % values
    if shown < replica_gpus:
        text += _(" (the first %(shown)s drawn; the others hold the same)") % values
    return text + _("; capacity %(capacity)s GiB each") % {"capacity": f"{capacity_gib:.1f}"}


def layout_text(parallel: dict[str, Any]) -> str:
    """The plan's layout in words: "tp 4, pp 1, ep 1, dp 2: 8 GPUs on 1 node"."""
    nodes = int(parallel.get("nodes") or 1)
    return _("tp %(tp)s, pp %(pp)s, ep %(ep)s, dp %(dp)s: %(gpus)s on %(nodes)s") % {
        "tp": parallel.get("tp", 1),
        "pp": parallel.get("pp", 1),
        "ep": parallel.get("ep", 1),
        "dp": parallel.get("dp", 1),
        "gpus": gpu_count(parallel.get("gpus")),
        "nodes": ngettext("%(count)s node", "%(count)s nodes", nodes) % {"count": nodes},
    }


# The planner's engine profiles (a plan's `engine.name`) by name, and the flag each launch command
# sets its batch of sequences with (planner/engines: vllm.py, sglang.py, trtllm.py).
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
BATCH_FLAGS = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "trtllm": "--max_batch_size"}


def concurrency_text(plan: dict[str, Any], envelope: dict[str, Any]) -> str:
    """The plan's concurrency as the engine commands set it: the sequences run at once (the launch's
    batch per replica times the replicas, at most what the KV cache holds), where the batch comes from
    (the request's concurrency, or the engine's default when it gave none), and the KV cache's figure.
    A plan's `max_concurrency` alone (48,521 beside `--max-num-seqs 1`) said two things at once."""
    held = plan.get("max_concurrency")
    engine = plan.get("engine") or {}
    seqs = engine.get("max_num_seqs")
    if held is None:
        return _not_stated()
    if not seqs:  # a plan stored before the planner named its batch
        return _("%(n)s sequences") % {"n": format_count(held)}
    replicas = int((plan.get("parallel") or {}).get("dp") or 1)
    name = str(engine.get("name") or "vllm")
    if envelope.get("concurrency") is not None:
        source = _("the request's concurrency")
    else:
        source = _("%(engine)s's default: no concurrency was given") % {"engine": ENGINE_NAMES.get(name, name)}
    return _(
        "%(running)s sequences at once: %(flag)s %(seqs)s on each of %(replicas)s, %(source)s; the KV cache "
        "holds %(held)s full-length sequences"
    ) % {
        "running": format_count(min(int(held), int(seqs) * replicas)),
        "flag": BATCH_FLAGS.get(name, "--max-num-seqs"),
        "seqs": int(seqs),
        "replicas": ngettext("%(count)s replica", "%(count)s replicas", replicas) % {"count": replicas},
        "source": source,
        "held": format_count(held),
    }


def launch_command(plan: dict[str, Any], envelope: dict[str, Any]) -> tuple[str, str] | None:
    """(engine, command): the plan's launch command for the approved engine, the argv whose batch the
    concurrency row states; None when the plan has none for it (`transformers serve`)."""
    engine = str(envelope.get("engine") or "")
    command = (plan.get("serving") or {}).get(engine)
    return (engine, str(command)) if command else None


def derivation_word(value: Any) -> str:
    """The artifact's derivation (an enum) in the packet's language."""
    if not value or value == "none":
        return _("none")
    return word(DERIVATIVE_KINDS, value)


def plan_model(plan: dict[str, Any], artifact: dict[str, Any]) -> str:
    """What the plan sized: the artifact by its name (the planner calls a model it has no preset
    for "custom"), with the planner's preset named where it used one."""
    name = str(artifact.get("name") or "")
    model = str(plan.get("model") or "")
    if not name:
        return model or _not_stated()
    if model and model != "custom" and model != name:
        return _("%(name)s (planner preset %(model)s)") % {"name": name, "model": model}
    return name


def backing_cluster(evidence: dict[str, Any], eval_clusters: dict[str, str]) -> str:
    """The cluster the eval that backs the approval ran on: the one the readiness rule accepts,
    else the latest passed one ("" when none passed)."""
    run = approved_eval(evidence) or next(
        (item for item in reversed(evidence.get("eval_results") or []) if item.get("status") == "passed"), None
    )
    return eval_clusters.get(str(run.get("eval") or ""), "") if run else ""


def summary(evidence: dict[str, Any], organisation: str) -> dict[str, Any]:
    """The first page: request, model, license decision, obligations, plan, eval, who signs what."""
    plan = (evidence.get("capacity_plan") or {}).get("result") or {}
    evals = evidence.get("eval_results") or []
    return {
        "organisation": organisation,
        "envelope": approved_envelope(evidence),
        "license_decisions": [
            (f"{item.get('license')} ({item.get('version')})", word(DECISIONS, item.get("decision")))
            for item in evidence.get("licenses") or []
        ],
        "obligations": _obligations(evidence.get("obligations") or []),
        "waivers": len(evidence.get("waivers") or []),
        "plan_fits": format_value(plan.get("fits")) if plan else _not_stated(),
        "plan_gpus": gpu_count((plan.get("parallel") or {}).get("gpus")) if plan else _not_stated(),
        "evals": [(str(item.get("scheme")), word(EVAL_STATUSES, item.get("status"))) for item in evals],
        "loose_thresholds": [
            (str(item.get("scheme")), float(item["threshold"]))
            for item in evals
            if item.get("threshold") is not None and float(item["threshold"]) > DEFAULT_EVAL_THRESHOLD
        ],
    }
