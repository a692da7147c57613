"""`make run`'s start-up notes: printed once the web server and a worker answer, after the services'
own start-up lines; the demo passwords (first start) again, then their file is gone; the metrics scrape
with the token of .env."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from governance.core import startnotes


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_notes_repeat_the_passwords_once_and_show_the_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env_file = tmp_path / ".env"
    env_file.write_text(f"HOST='0.0.0.0'\nPORT='{server.server_port}'\nMETRICS_TOKEN='tok-123'\n")
    monkeypatch.setattr(startnotes, "_worker_answers", lambda: True)
    for name in ("HOST", "PORT", "METRICS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    passwords = tmp_path / "demo-passwords"
    passwords.write_text("  legal      legal_reviewer         pw-legal\n")
    try:
        assert startnotes.main(["--passwords-file", str(passwords), "--env-file", str(env_file), "--wait-s", "30"]) == 0
        first = capsys.readouterr().out
        assert startnotes.main(["--passwords-file", str(passwords), "--env-file", str(env_file), "--wait-s", "30"]) == 0
        again = capsys.readouterr().out
    finally:
        server.shutdown()
    url = f"http://127.0.0.1:{server.server_port}"
    assert f"Serving {url}/" in first
    assert "  legal      legal_reviewer         pw-legal" in first.splitlines()
    assert f'curl -H "Authorization: Bearer tok-123" {url}/metrics' in first
    assert not passwords.exists()  # shown once, then gone from the disk
    assert "pw-legal" not in again
    assert "--reset-passwords" in again
