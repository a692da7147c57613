"""The local env file under `make run`: honcho reads it too (and exports what it reads before the
settings look), so every value must read the same to honcho and to the settings after each start's
rewrite; a JSON value (docs/access.md's SSO recipe) once came out of honcho as `{gov-legal:…}` and
stopped the service. The rewrite also makes a metrics token once, so /metrics answers a local scrape."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from dotenv import dotenv_values
from honcho.environ import parse as honcho_parse  # type: ignore[import-untyped]

from governance.core.localenv import metrics_token, write_local_env

ROOT = Path(__file__).resolve().parents[2]


def sso_recipe() -> list[str]:
    """The `.env` lines docs/access.md gives for the loopback provider under `make run`."""
    blocks = re.findall(r"^```text\n(.*?)^```", (ROOT / "docs" / "access.md").read_text(), re.S | re.M)
    lines = [b for b in blocks if b.startswith("OIDC_ISSUER=")]
    assert len(lines) == 1, "docs/access.md: one text block of .env lines for the loopback provider"
    return lines[0].splitlines()


def test_json_values_of_the_sso_recipe_survive_every_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / ".env"
    # The recipe as the docs give it, and a team map written without quotes, as a user may add one.
    path.write_text("\n".join([*sso_recipe(), 'OIDC_TEAM_GROUPS={"team-platform": "platform"}', "NOTE=a # b"]) + "\n")
    write_local_env(path, environ={})
    written = write_local_env(path, environ={})  # every `make run` rewrites the file
    text = path.read_text()
    honcho = honcho_parse(text)  # what honcho exports to the web server, worker and beat
    settings = {k: v for k, v in dotenv_values(path, interpolate=False).items() if v is not None}
    for reader in (honcho, settings, written):
        assert json.loads(reader["OIDC_ROLE_GROUPS"]) == {"gov-legal": "legal_reviewer"}, text
        assert json.loads(reader["OIDC_TEAM_GROUPS"]) == {"team-platform": "platform"}, text
        assert reader["OIDC_ISSUER"] == "https://127.0.0.1:8950"
        assert reader["NOTE"] == "a"  # python-dotenv's reading of the user's line is kept, comment dropped
    assert {k: honcho[k] for k in settings} == settings

    # The settings' own parser, on the value honcho hands the processes.
    from governance.settings import _json_map

    monkeypatch.setenv("OIDC_ROLE_GROUPS", honcho["OIDC_ROLE_GROUPS"])
    assert _json_map("OIDC_ROLE_GROUPS") == {"gov-legal": "legal_reviewer"}


def test_settings_started_by_honcho_read_the_role_map(tmp_path: Path) -> None:
    """The real path: `honcho run` exports the rewritten file, then Django's settings load it again."""
    path = tmp_path / ".env"
    path.write_text("\n".join(sso_recipe()) + "\n")
    write_local_env(path, environ={})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "OIDC_", "DEBUG", "SECRET_KEY"))}
    env["GOVERNANCE_VAR_DIR"] = str(tmp_path / "var")
    probe = "from django.conf import settings; print(json.dumps(settings.OIDC_ROLE_GROUPS))"
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("honcho")),
            "-e",
            str(path),
            "run",
            sys.executable,
            "-c",
            f"import django, json, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'governance.settings'; django.setup(); {probe}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {"gov-legal": "legal_reviewer"}


def test_values_are_quoted_for_both_readers_or_refused(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    tricky = {"QUOTE": "it's", "HASH": "a#b c", "BACKSLASH": r"C:\models", "DOLLAR": "${HOME}/x", "EMPTY": ""}
    path.write_text(
        "".join(f"{k}={json.dumps(v)}\n" for k, v in tricky.items() if k != "DOLLAR") + "DOLLAR='${HOME}/x'\n"
    )
    write_local_env(path, environ={})
    honcho = honcho_parse(path.read_text())
    settings = dotenv_values(path, interpolate=False)
    for name, value in tricky.items():
        assert honcho.get(name, "") == value == settings[name], (name, path.read_text())
    path.write_text('MULTI="one\\ntwo"\n')  # python-dotenv reads a line break; honcho reads lines
    with pytest.raises(ValueError, match=r"MULTI: .* honcho and the settings read it alike"):
        write_local_env(path, environ={})


def test_a_metrics_token_is_made_once_unless_one_is_configured(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    first = write_local_env(path, environ={})
    assert len(first["METRICS_TOKEN"]) >= 32
    assert write_local_env(path, environ={})["METRICS_TOKEN"] == first["METRICS_TOKEN"]  # a scraper keeps working
    assert metrics_token(path, environ={}) == first["METRICS_TOKEN"]
    assert metrics_token(path, environ={"METRICS_TOKEN": "from-env"}) == "from-env"  # the environment wins
    other = tmp_path / "other.env"
    assert "METRICS_TOKEN" not in write_local_env(other, environ={"METRICS_TOKEN_FILE": "/run/secrets/metrics"})
