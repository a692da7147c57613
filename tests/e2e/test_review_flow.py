"""One deployment request from wizard to approval, CI gate and usage alert, in a real browser, in
English and in Chinese: the pages a requester (also a team lead), a legal reviewer and an engineering
reviewer use, and scripts/gate-check run against the live server with a token made on the tokens page.

Each step is screenshotted under var/screenshots/<test>/ and each page is checked with axe-core."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import approved_eval
from governance.evaluations.models import Cluster, ExecutorKind
from tests.conftest import Personas
from tests.deployments.conftest import ensure_passed_eval
from tests.e2e.conftest import Recorder, local_cluster_setup, tiny_checkpoint, wait_for
from tests.evaluations.conftest import locate

pytestmark = [pytest.mark.worker, pytest.mark.e2e, pytest.mark.slow]
KIMI = "kimi-k2-modified-mit"
DISPLAY = '#preview .finding[data-code="attribution.display"]'
GATE_CHECK = Path(__file__).resolve().parents[2] / "scripts" / "gate-check"


class Session:
    """One persona's browser context, logged in through the login page."""

    def __init__(self, browser: Any, base_url: str, language: str) -> None:
        self.context = browser.new_context(base_url=base_url, locale="en-US", viewport={"width": 1280, "height": 900})
        self.context.set_default_timeout(20_000)
        self.page = self.context.new_page()
        self.language = language

    def login(self, username: str, recorder: Recorder | None = None, switch_language: bool = False) -> Any:
        page = self.page
        page.goto("/accounts/login/")
        if switch_language:  # through the switcher, as a person would
            page.select_option("#language-select", self.language)  # submits on change (static/js/app.js)
            wait_for(page, f'html[lang="{self.language}"]')
        elif self.language != "en":
            # for the whole site: with the login page's URL the cookie's path would be /accounts/,
            # and every other page would be served in the Accept-Language's English
            origin = page.url.split("/accounts/", 1)[0]
            self.context.add_cookies([{"name": "django_language", "value": self.language, "url": origin + "/"}])
            page.reload()
        assert page.get_attribute("html", "lang") == self.language
        if recorder is not None:
            recorder.axe(page, "login")
            recorder.shot(page, "login")
        page.fill("#id_username", username)
        page.fill("#id_password", f"pw-{username}")
        page.click("main form button[type=submit]")
        wait_for(page, "h1")
        assert page.get_attribute("html", "lang") == self.language  # after signing in too
        return page

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def local_cluster(transactional_db: None, tmp_path: Path) -> Cluster:
    # Evals read checkpoints only inside the cluster's model roots: the test's tiny model lives under tmp_path.
    return Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp_path / "runs"),
        model_roots=[str(tmp_path)],
        default_time_limit_s=600,
        setup_lines=local_cluster_setup(),
    )


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_request_to_approval_and_usage_alert(
    language: str,
    browser,
    live_server,
    worker_queue,
    org_pki,
    personas: Personas,
    catalog,
    local_cluster,
    recorder,
    tmp_path,
) -> None:
    checkpoint = tiny_checkpoint(tmp_path / "tiny-qwen3-moe")
    requester = Session(browser, live_server.url, language)
    legal = Session(browser, live_server.url, language)
    engineer = Session(browser, live_server.url, language)
    try:
        page = requester.login("req", recorder, switch_language=language != "en")
        recorder.axe(page, "dashboard")

        # 1. the wizard: register the Kimi K2 W4A8 artifact and describe the deployment
        page.goto("/requests/new")
        page.select_option("#id_artifact", "")
        page.fill("#id_new_name", "Kimi-K2-Instruct-W4A8")
        page.fill("#id_new_source_repo", "moonshotai/Kimi-K2-Instruct")
        page.fill("#id_new_revision", "main")
        page.fill("#id_new_weights_digest", "sha256:" + "ab" * 32)
        page.select_option("#id_new_license", KIMI)
        page.fill("#id_new_architecture_key", "kimi-k2")
        page.fill("#id_product_name", "Acme Assistant")
        page.select_option("#id_use_case", "external_commercial")
        page.check("#id_hosted_service")
        page.fill("#id_monthly_active_users", "2000000")
        page.fill("#id_org_country", "US")
        page.fill("#id_revenue_amount", "15000000")
        wait_for(page, f'#preview .preview-result[data-license="{KIMI}"]')
        wait_for(page, '#preview .preview-facts[data-revenue="15000000.0"][data-mau="2000000"]')
        assert page.locator(DISPLAY).count() == 0  # USD 15M: under Kimi's USD 20M a month
        recorder.shot(page, "wizard-under-threshold")

        # 2. the live preview shows the display obligation once revenue crosses USD 20M
        page.fill("#id_revenue_amount", "25000000")
        wait_for(page, '#preview .preview-facts[data-revenue="25000000.0"]')
        wait_for(page, DISPLAY)
        assert "Kimi K2" in page.inner_text(DISPLAY)
        recorder.axe(page, "wizard")
        recorder.shot(page, "wizard-preview-display-obligation")
        page.select_option("#id_precision", "w4a8")
        page.select_option("#id_gpu", "h200")
        page.fill("#id_max_model_len", "131072")
        page.click("button[name=create]")
        page.wait_for_url(re.compile(r"/requests/[0-9a-f-]{36}/$"))
        code = page.url.rstrip("/").rsplit("/", 1)[1]
        assert page.locator('.finding[data-code="attribution.display"]').count() >= 1
        recorder.axe(page, "request-draft")
        recorder.shot(page, "request-draft")

        # 3. submit: the capacity plan is computed by the worker and appears on the page
        page.click('form[action$="/submit"] button')
        wait_for(page, ".capacity-verdict", timeout=90_000)
        assert page.locator(".capacity-verdict.ok").count() == 1
        assert page.locator("#capacity svg rect").count() >= 4
        assert "vllm serve" in page.inner_text("#cmd-vllm")
        recorder.axe(page, "request-submitted")
        recorder.shot(page, "capacity-plan")

        # 4. legal starts the review
        lpage = legal.login("legal")
        lpage.goto(f"/requests/{code}/")
        lpage.click('form[action$="/start-review"] button')
        wait_for(lpage, "h1 .status-in_review")

        # 5. engineering runs the eval on the local executor; progress is visible while it runs
        epage = engineer.login("eng")
        epage.goto(f"/requests/{code}/")
        epage.select_option("#id_cluster", "local")
        epage.select_option("#id_scheme", "w4a8")
        epage.fill("#id_threshold", "0.5")
        epage.fill("#id_max_cases_per_category", "5")  # 5 clean cases per category: bound 0.45 < 0.5
        epage.fill("#id_max_new_tokens", "4")  # a random-weight model: short answers keep the run short
        locate(code, "local", str(checkpoint))  # the operator recorded where the weights lie on the cluster
        epage.select_option("#id_kind", "screening")
        epage.click('form[action$="/evals/new"] button')
        wait_for(epage, ".eval-run")
        wait_for(epage, '.eval-run[data-state="running"], .eval-run[data-state="succeeded"]', timeout=120_000)
        recorder.shot(epage, "eval-progress")
        wait_for(epage, '.eval-run[data-status="passed"]', timeout=300_000)
        assert epage.get_attribute(".eval-run progress", "value") == "20"  # 5 cases in each of 4 categories
        recorder.axe(epage, "request-eval-done")
        recorder.shot(epage, "eval-passed")
        # Screening is a what-if and never satisfies readiness: the W4A8 weights themselves were
        # served and evaluated on the GPU cluster (that path runs for real, through `transformers
        # serve`, in tests/evaluations/test_served_eval.py); its passed result becomes evidence here.
        assert epage.locator('#blockers tr.blocker[data-code="eval.missing"]').count() == 1
        ensure_passed_eval(code)

        # 6. the requester says how each obligation is met; legal accepts each
        page.goto(f"/requests/{code}/")  # a full load: a same-page #fragment would keep the stale page
        while page.locator('.obligation[data-status="open"]').count():
            item = page.locator('.obligation[data-status="open"]').first
            item.locator("textarea").fill("Shown in the footer of every page and in the About dialog")
            item.locator('form[action$="/acknowledge"] button').click()
            page.wait_for_load_state("load")
        assert page.locator('.obligation[data-status="acknowledged"]').count() >= 1
        recorder.shot(page, "obligations-acknowledged")
        lpage.goto(f"/requests/{code}/")  # a full load: a same-page #fragment would keep the stale page
        while lpage.locator('.obligation[data-status="acknowledged"]').count():
            lpage.locator('.obligation[data-status="acknowledged"] button[value="true"]').first.click()
            lpage.wait_for_load_state("load")
        assert lpage.locator('.obligation[data-status="accepted"]').count() >= 1

        # 7. legal, then engineering, sign off on the evidence they see
        # only the signatures themselves remain (the readiness rule lists them as who acts next)
        assert lpage.locator('tr.blocker:not([data-code="signature.missing"])').count() == 0, lpage.inner_text(
            "#blockers"
        )
        recorder.axe(lpage, "request-ready-to-sign")
        lpage.select_option("#id_verdict", "approve")
        lpage.fill("#id_password", "pw-legal")
        lpage.click('form[action$="/review"] button')
        wait_for(lpage, '.decision-row[data-role="legal"][data-verdict="approve"]')
        recorder.shot(lpage, "legal-signed")
        epage.goto(f"/requests/{code}/")  # a full load: a same-page #fragment would keep the stale page
        epage.select_option("#id_verdict", "approve")
        epage.fill("#id_password", "pw-eng")
        epage.click('form[action$="/review"] button')
        # The decision is recorded at once; the heavy worker renders and signs the packet, and the
        # request is approved when both signatures verify (issue 29): reload until it shows.
        deadline = time.monotonic() + 90
        while epage.locator("h1 .status-approved").count() == 0 and time.monotonic() < deadline:
            epage.wait_for_timeout(1000)
            epage.reload()
        wait_for(epage, "h1 .status-approved")
        recorder.axe(epage, "request-approved")
        recorder.shot(epage, "approved")

        # 8. the requester, made a lead of their team, creates a CI token; the secret is shown once
        personas.team.leads.add(personas.requester)
        page.goto("/")
        page.click('header nav a[href="/tokens/"]')
        wait_for(page, 'form[action="/tokens/"]')
        recorder.axe(page, "tokens")
        page.fill("#id_name", "deploy-prod")
        page.fill("#id_environments", "production")
        page.click('form[action="/tokens/"] button[type=submit]')
        wait_for(page, "#token-secret")
        secret = page.inner_text("#token-secret").strip()
        assert secret.startswith("gov_"), secret
        recorder.axe(page, "token-created")
        recorder.shot(page, "token-created")
        page.goto("/tokens/")
        assert secret not in page.content()  # never shown again
        assert page.locator('tr.token[data-active="true"]').count() == 1
        recorder.shot(page, "tokens")

        # 9. the pipeline asks the gate with the approved serving config and weights: allow (exit 0)
        approved = DeploymentRequest.objects.get(code=code)
        assert approved.evidence is not None
        envelope = approved.evidence["serving_envelope"]
        plan_layout = approved.evidence["capacity_plan"]["result"]["parallel"]  # the serving plan left tp/pp/ep open
        layout = {name: int(envelope.get(name) or plan_layout.get(name) or 1) for name in ("tp", "pp", "ep")}
        argv = [sys.executable, str(GATE_CHECK), "--deployment", code, "--environment", "production",
                "--artifact-digest", approved.evidence["artifact"]["weights_digest"], "--engine", envelope["engine"],
                "--precision", envelope["precision"], "--gpu", envelope["gpu"], "--tp", str(layout["tp"]),
                "--pp", str(layout["pp"]), "--ep", str(layout["ep"]), "--max-model-len", str(envelope["max_model_len"]),
                "--gpu-memory-utilization", "0.9", "--timeout", "30"]  # fmt: skip
        evaluated = approved_eval(approved.evidence)  # the gate requires the version the eval served
        if evaluated is not None and evaluated.get("engine_version"):
            argv += ["--engine-version", str(evaluated["engine_version"])]
        env = {"PATH": os.environ.get("PATH", ""), "GOV_URL": live_server.url, "GOV_TOKEN": secret}
        gate = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert gate.returncode == 0, (gate.stdout, gate.stderr)
        assert "allow" in gate.stdout

        # 10. the request page shows that decision and the packet's verification; the packet
        # downloads from it and verifies on the verify page
        page.goto(f"/requests/{code}/")
        assert page.locator('tr.gate-decision[data-decision="allow"]').count() == 1
        assert "production" in page.inner_text("tr.gate-decision")
        verified = page.locator(".packet-verification")
        assert verified.get_attribute("data-legal-valid") == "true"
        assert verified.get_attribute("data-engineering-valid") == "true"
        assert verified.get_attribute("data-current") == "true"
        recorder.axe(page, "request-gate-decisions")
        recorder.shot(page, "request-gate-decisions")
        with page.expect_download() as download:
            page.click(".packet a")
        packet = tmp_path / "approval-packet.pdf"
        download.value.save_as(str(packet))
        assert packet.read_bytes().startswith(b"%PDF")
        page.goto("/verify/")
        page.set_input_files("#id_file", str(packet))
        page.click('form[action="/verify/"] button[type=submit]')
        wait_for(page, ".verify-report")  # the heavy worker verifies it; the upload's page fills in the report
        assert page.get_attribute(".verify-report", "data-all-valid") == "true"
        assert page.locator('tr.signature[data-accepted="true"]').count() == 2
        assert page.locator('tr.signature[data-accepted="false"]').count() == 0
        assert page.locator('tr.signature[data-role="legal"]').count() == 1
        assert page.locator('tr.signature[data-role="engineering"]').count() == 1
        assert page.get_attribute(".evidence-current", "data-current") == "true"
        recorder.axe(page, "verify")
        recorder.shot(page, "packet-verified")

        # 11. a usage report crosses Kimi's 100M monthly-active-user term: the dashboard alerts
        page.goto(f"/requests/{code}/")  # a full load: a same-page #fragment would keep the stale page
        page.fill("#id_month", "2026-11")
        page.fill("#id_monthly_active_users", "150000000")
        page.fill("#id_revenue_amount", "25000000")
        page.click('form[action$="/usage"] button')
        wait_for(page, "#usage table")
        page.goto("/")
        alert = page.locator('.alert[role="alert"]')
        assert alert.count() == 1
        assert "Acme Assistant" in alert.inner_text()
        recorder.axe(page, "dashboard-alert")
        recorder.shot(page, "dashboard-usage-alert")

        # the other pages, checked with axe in this language
        for url, name in (
            ("/requests/", "requests"),
            ("/licenses/", "licenses"),
            (f"/licenses/{KIMI}/", "license"),
            ("/clusters/", "clusters"),
        ):
            page.goto(url)
            recorder.axe(page, name)
        lpage.goto("/audit/")
        recorder.axe(lpage, "audit")
        recorder.shot(lpage, "audit")
    finally:
        for session in (requester, legal, engineer):
            session.close()
