"""The image's static files: collected as docker/Dockerfile collects them (its collectstatic step,
with that step's environment), the pages that use `{% static %}` answer 200 with DEBUG off and the
manifest storage that production uses. Collected with DEBUG on, no manifest is written and every
such page answers 500 ("Missing staticfiles manifest entry")."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_STORAGE = "whitenoise.storage.CompressedManifestStaticFilesStorage"


def dockerfile_collectstatic_env() -> dict[str, str]:
    """The variables the Dockerfile's collectstatic command runs with (`NAME=value python manage.py
    collectstatic`); the image has no local .env, so DEBUG is whatever that step sets, else off."""
    text = (ROOT / "docker/Dockerfile").read_text().replace("\\\n", " ")
    runs = [line for line in text.splitlines() if line.startswith("RUN ") and "collectstatic" in line]
    assert len(runs) == 1, runs
    step = next(part for part in re.split(r"&&|;", runs[0].removeprefix("RUN ")) if "collectstatic" in part)
    words = shlex.split(step)
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[:3] == ["python", "manage.py", "collectstatic"], words
    return env


def test_dockerfile_collects_with_production_settings() -> None:
    env = dockerfile_collectstatic_env()
    assert env.get("DEBUG", "0") in ("0", "false", ""), "collectstatic with DEBUG on writes no manifest"


def collectstatic_as_the_dockerfile_does(tmp_path: Path) -> Path:
    """The image's collectstatic step (its environment, production settings) into a var directory
    outside the code tree, as the image keeps GOVERNANCE_VAR_DIR; returns STATIC_ROOT."""
    var_dir = tmp_path / "var"
    environ = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    environ |= {"DJANGO_SETTINGS_MODULE": "governance.settings", "GOVERNANCE_VAR_DIR": str(var_dir), "DEBUG": "0"}
    environ |= dockerfile_collectstatic_env()
    done = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return var_dir / "staticfiles"


# One test, one collectstatic: compressing the collected files (gzip and Brotli, source maps left as
# they are) takes ~20 s on the CI machine, and both checks below need the same collected tree.
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # committed, as production requests are
def test_collected_manifest_serves_every_page_with_debug_off_and_the_var_directory_outside_the_code(
    tmp_path: Path, settings: Any, personas: Any
) -> None:
    static_root = collectstatic_as_the_dockerfile_does(tmp_path)
    assert (static_root / "staticfiles.json").is_file()
    # Bundles are collected gzipped and Brotli-compressed; their source maps as they are (settings'
    # WHITENOISE_SKIP_COMPRESS_EXTENSIONS: the developer tools' files, half the step's time).
    bundles = static_root / "drf_spectacular_sidecar" / "redoc" / "bundles"
    # only the hashed copies are kept (WHITENOISE_KEEP_ONLY_HASHED_FILES), each compressed
    scripts = sorted(path.name for path in bundles.glob("redoc.standalone.*.js"))
    assert len(scripts) == 1, scripts
    assert re.fullmatch(r"redoc\.standalone\.[0-9a-f]{12}\.js", scripts[0]), scripts
    assert (bundles / f"{scripts[0]}.gz").is_file()
    assert (bundles / f"{scripts[0]}.br").is_file()
    assert not (bundles / "redoc.standalone.js").exists()
    maps = sorted(bundles.glob("redoc.standalone.js*.map"))
    assert len(maps) == 1, maps  # the hashed one alone
    assert maps[0].name != "redoc.standalone.js.map", maps
    assert not list(bundles.glob("*.map.gz"))
    assert not list(bundles.glob("*.map.br"))
    storages = {**settings.STORAGES, "staticfiles": {"BACKEND": MANIFEST_STORAGE}}
    pages = ["/", "/requests/", "/licenses/", "/clusters/", "/audit/", "/tokens/", "/teams/", "/verify/"]
    with override_settings(DEBUG=False, STATIC_ROOT=static_root, STORAGES=storages, WHITENOISE_USE_FINDERS=False):
        client = Client(raise_request_exception=False)
        for path in ("/accounts/login/", "/admin/login/", "/api/docs/"):
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
        # The hashed names are what the pages link to, and whitenoise serves them.
        page = client.get("/accounts/login/").content.decode()
        linked = re.findall(r'/static/([^"\']+\.[0-9a-f]{12}\.(?:css|js))', page)
        assert linked, page[:500]
        assert client.get(f"/static/{linked[0]}").status_code == 200
        hashed_map = maps[0].name
        assert client.get(f"/static/drf_spectacular_sidecar/redoc/bundles/{hashed_map}").status_code == 200
        for user in (personas.requester, personas.legal, personas.engineer, personas.auditor, personas.admin):
            client = Client(raise_request_exception=False)
            client.force_login(user)
            for path in pages:
                status = client.get(path).status_code
                assert status in (200, 403), (user.username, path, status)  # never a 500
