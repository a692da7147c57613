"""The browser harness: Debian's Chromium driven by Playwright against pytest-django's live server
(real PostgreSQL/SQLite test database, a real Celery worker, the local cluster executor).

Playwright's own browser download is never used: the launch names /usr/bin/chromium, which
scripts/system-deps installs. axe-core (vendored) is injected into each page checked."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from governance.celery import app
from tests.conftest import WorkerHandle, compile_messages
from tests.deployments.conftest import artifacts, catalog, flow  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text()
SERIOUS = ("serious", "critical")


@pytest.fixture(scope="session", autouse=True)
def compiled_messages() -> None:
    compile_messages()


# Module scope: Playwright's sync API keeps an asyncio loop running in the test thread while it is
# open, which would break every later test that runs a loop of its own (pyHanko signs with
# asyncio.run). It is closed when the browser tests end.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/system-deps (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    # While the loop runs, the ORM calls the tests make between browser steps are ordinary blocking
    # calls, not coroutines: Django's async guard is lifted for the browser tests only (set in
    # os.environ, it would leak into subprocesses such as `manage.py check --deploy`).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield launched
            launched.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def worker_queue(celery_worker: WorkerHandle, settings: Any) -> Iterator[str]:
    """Route the live server's .delay() calls (heavy planner work included) to this session's real worker."""
    settings.CELERY_HEAVY_QUEUE = celery_worker.queue
    if celery_worker.audit_key_path is not None:  # one checkpoint key for the live server and the worker
        settings.AUDIT_SIGNING_KEY_PATH = str(celery_worker.audit_key_path)
        settings.AUDIT_CHECKPOINT_PUBLISH_PATH = str(
            celery_worker.audit_key_path.parent / "published-checkpoints.jsonl"
        )
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = celery_worker.queue
    yield celery_worker.queue
    app.conf.task_default_queue = previous


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """Serious or critical axe-core violations on the page as it is now."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # Evaluated through the DevTools protocol, which the page's Content-Security-Policy
        # (script-src 'self', no inline script) does not govern; a <script> tag would be refused.
        page.evaluate("(source) => { (0, eval)(source); }", AXE)
    result = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result
        if v["impact"] in SERIOUS
    ]


def wait_for(page: Any, selector: str, timeout: float = 20_000) -> None:
    """page.wait_for_selector, but a timeout says what the page showed (its messages and errors)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_selector(selector, timeout=timeout)
    except PlaywrightTimeout:
        shown = page.locator(".messages, .errorlist, .error").all_inner_texts()
        raise AssertionError(f"{selector!r} never appeared on {page.url}; the page said: {shown}") from None


@dataclass
class Recorder:
    """Screenshots of each step under var/screenshots/<run>/ and the axe result of each page."""

    folder: Path
    checked: list[str] = field(default_factory=list)
    count: int = 0

    def shot(self, page: Any, name: str) -> Path:
        self.count += 1
        path = self.folder / f"{self.count:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    def axe(self, page: Any, name: str) -> None:
        violations = axe_violations(page)
        assert not violations, f"{name}: " + json.dumps(violations, ensure_ascii=False, indent=1)
        self.checked.append(name)


@pytest.fixture
def recorder(request: pytest.FixtureRequest) -> Recorder:
    name = request.node.name.replace("[", "-").replace("]", "")
    folder = Path(settings.VAR_DIR) / "screenshots" / name
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return Recorder(folder)


def tiny_checkpoint(folder: Path) -> Path:
    """A real (random-weight) Qwen3-MoE checkpoint on disk: what the eval job loads by path."""
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    from planner.evaljob.tiny import TINY_QWEN3_MOE, train_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer_file = train_tokenizer(folder / "tokenizer-source.json")
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), eos_token="<eos>", pad_token="<pad>")
    tokenizer.save_pretrained(str(folder))
    config = AutoConfig.for_model(**TINY_QWEN3_MOE)
    import torch

    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(str(folder))
    return folder


def local_cluster_setup() -> str:
    """Shell lines for the local executor: this interpreter and this checkout."""
    return f"export PATH={Path(sys.executable).parent}:$PATH PYTHONPATH={ROOT}"
