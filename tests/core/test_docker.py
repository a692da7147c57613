"""No Docker engine runs here, so the compose file is checked as data."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_services_share_the_app_environment() -> None:
    compose = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "web", "worker", "beat"}
    app_services = [services[name] for name in ("web", "worker", "beat")]
    for service in app_services:
        assert service["build"]["dockerfile"] == "docker/Dockerfile"
        assert service["environment"]["DATABASE_URL"].startswith("postgres://")
        assert service["environment"]["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert "SECRET_KEY" not in service["environment"]  # a secret file, never inline
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert len({id(s["environment"]) for s in app_services}) == 1 or all(
        s["environment"] == app_services[0]["environment"] for s in app_services
    )
    for name in ("postgres", "redis", "web", "worker"):
        assert "healthcheck" in services[name], name
    assert {"postgres-data", "redis-data", "governance-data"} <= set(compose["volumes"])


def test_compose_workers_share_one_cache() -> None:
    """gunicorn runs several workers: without a shared cache each keeps its own throttle counters
    (a rate limit multiplied by the worker count), its own sessions cache and its own pages."""
    compose = yaml.safe_load((ROOT / "docker/compose.yaml").read_text())
    for name in ("web", "worker", "beat"):
        environment = compose["services"][name]["environment"]
        assert environment["CACHE_URL"].startswith("redis://redis:6379/"), name
        assert environment["CACHE_URL"] != environment["CELERY_BROKER_URL"], name  # not the broker's database


def test_dockerfile_is_multi_stage_and_non_root() -> None:
    dockerfile = (ROOT / "docker/Dockerfile").read_text()
    assert dockerfile.count("FROM ") >= 2
    assert "\nUSER governance" in dockerfile
    assert "collectstatic" in dockerfile
    assert "libharfbuzz-subset0" in dockerfile
