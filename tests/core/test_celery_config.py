"""Every Celery task has soft/hard time limits and a queue; heavy planner work has its own queue (issue 18)."""

from __future__ import annotations

from django.conf import settings

from governance.celery import HEAVY_TASKS, app


def _our_tasks() -> dict[str, object]:
    app.loader.import_default_modules()
    return {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}


def test_every_task_has_soft_and_hard_time_limits() -> None:
    tasks = _our_tasks()
    assert {"capacity.compute_plan", "capacity.resume", "jobs.poll", "audit.checkpoint"} <= set(tasks)
    for name, task in tasks.items():
        soft, hard = getattr(task, "soft_time_limit", None), getattr(task, "time_limit", None)
        assert soft is not None, f"{name} has no soft time limit"
        assert hard is not None, f"{name} has no hard time limit"
        assert 0 < soft < hard, name
    assert settings.CELERY_TASK_SOFT_TIME_LIMIT < settings.CELERY_TASK_TIME_LIMIT
    # A plan's claim must outlive its worker's hard limit, or a slow plan would be computed twice.
    assert tasks["capacity.compute_plan"].time_limit < settings.CAPACITY_PLAN_LEASE_S  # type: ignore[attr-defined]


def test_every_task_is_routed_and_plans_go_to_the_heavy_queue() -> None:
    router = app.amqp.router
    assert settings.CELERY_HEAVY_QUEUE != settings.CELERY_TASK_DEFAULT_QUEUE
    for name in _our_tasks():
        queue = router.route({}, name, args=(), kwargs={})["queue"].name
        expected = settings.CELERY_HEAVY_QUEUE if name in HEAVY_TASKS else settings.CELERY_TASK_DEFAULT_QUEUE
        assert queue == expected, name
    assert sorted(HEAVY_TASKS) == ["approvals.packet_complete", "approvals.verify_upload", "capacity.compute_plan"]


def test_the_workers_consume_both_queues() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for path in (root / "Procfile", root / "docker" / "compose.yaml"):
        text = path.read_text()
        assert "-Q" in text or "--queues" in text, path
        assert settings.CELERY_HEAVY_QUEUE in text, path
        assert settings.CELERY_TASK_DEFAULT_QUEUE in text, path
