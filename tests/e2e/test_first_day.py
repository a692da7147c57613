"""A team's first day in a real browser: the navigation on one line at 1280 px (the longest a person
can get, in English and Chinese), a request on a GPU outside the catalog whose blocker list
refreshes by itself when the worker finishes the capacity plan, and a team lead managing the
team's members on the teams page. Screenshots under var/screenshots/<test>/, axe on each page."""

from __future__ import annotations

import json

import pytest

from governance.core.roles import Role
from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas, make_user
from tests.deployments.test_custom_gpu import SPEC
from tests.e2e.conftest import Recorder, wait_for
from tests.e2e.test_review_flow import Session

pytestmark = [pytest.mark.e2e]


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_navigation_stays_on_one_line_at_1280_px(
    language: str, browser, live_server, personas: Personas, recorder: Recorder
) -> None:
    # every navigation item at once: a requester who is also an admin and leads a team
    everyone = make_user("everything", Role.REQUESTER, Role.ADMIN, Role.AUDITOR, team=personas.team)
    personas.team.leads.add(everyone)
    session = Session(browser, live_server.url, language)
    try:
        session.context.close()
        session.context = browser.new_context(
            base_url=live_server.url, locale="en-US", viewport={"width": 1280, "height": 800}
        )
        session.page = session.context.new_page()
        page = session.login("everything", switch_language=language != "en")
        recorder.shot(page, f"nav-1280-{language}")
        items = page.locator(".topbar nav li")
        assert items.count() == 10  # dashboard … teams, verify, API
        tops = page.evaluate("[...document.querySelectorAll('.topbar nav li')].map(li => li.offsetTop)")
        assert len(set(tops)) == 1, f"the navigation wraps: {tops}"
        rows = page.evaluate(
            "['.brand', '.topbar nav', '.topbar .account'].map(s => document.querySelector(s).getBoundingClientRect().top)"
        )
        widths = page.evaluate(
            "['.brand', '.topbar nav', '.topbar .account', '.topbar nav ul'].map(s => document.querySelector(s).getBoundingClientRect().width)"
        )
        assert max(rows) - min(rows) < 12, f"the top bar wraps: {rows} {widths}"
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    finally:
        session.close()


@pytest.mark.worker
@pytest.mark.slow
def test_custom_gpu_request_and_team_management(
    browser, live_server, worker_queue, personas: Personas, catalog, recorder: Recorder
) -> None:
    personas.team.leads.add(personas.requester)
    make_user("newcomer")
    session = Session(browser, live_server.url, "en")
    try:
        page = session.login("req")

        # 1. the wizard: a checkpoint with a pasted config.json, served on a GPU outside the catalog
        page.goto("/requests/new")
        page.select_option("#id_artifact", "")
        page.fill("#id_new_name", "Qwen3-30B-A3B-lab")
        page.fill("#id_new_source_repo", "Qwen/Qwen3-30B-A3B")
        page.fill("#id_new_revision", "main")
        page.fill("#id_new_weights_digest", "sha256:" + "cd" * 32)
        page.select_option("#id_new_license", "apache-2.0")
        page.fill("#id_new_architecture_key", "Qwen/Qwen3-30B-A3B-Instruct-2507")  # not a catalog key
        page.fill("#id_product_name", "Lab Assistant")
        page.select_option("#id_use_case", "internal")
        page.select_option("#id_precision", "fp8")
        page.select_option("#id_gpu", "")
        page.click('summary:has-text("A GPU outside the catalog")')
        page.fill("#id_gpu_spec", json.dumps({**SPEC, "memory_gb": 288}))
        page.click("button[name=create]")
        wait_for(page, "#id_new_architecture_key_errors")
        assert "closest: qwen3-30b-a3b" in page.inner_text("#id_new_architecture_key_errors")
        recorder.axe(page, "wizard-architecture-error")
        recorder.shot(page, "wizard-closest-architecture")
        page.fill("#id_new_architecture_key", "qwen3-30b-a3b")
        page.click("button[name=create]")  # nothing was kept: the artifact is registered with the request
        wait_for(page, "#id_gpu_spec_errors")
        assert "memory_gb" in page.inner_text("#id_gpu_spec_errors")  # the bad field, on its input
        recorder.axe(page, "wizard-gpu-spec-error")
        recorder.shot(page, "wizard-gpu-spec-error")
        page.fill("#id_gpu_spec", json.dumps(SPEC))
        page.click("button[name=create]")
        wait_for(page, "h1 .badge")
        deployment = DeploymentRequest.objects.get(product_name="Lab Assistant")
        assert deployment.serving_plan["gpu"] == SPEC["key"]

        # 2. submitted: the blocker list waits for the plan, then refreshes by itself (no reload)
        page.click("text=Submit for review")
        wait_for(page, '#blockers .blocker[data-code="capacity.pending"]')
        recorder.shot(page, "blockers-plan-pending")
        page.wait_for_selector('#blockers .blocker[data-code="capacity.pending"]', state="detached", timeout=60_000)
        assert page.get_attribute("#blockers", "hx-trigger") is None  # nothing pending: the polling stopped
        wait_for(page, "#capacity .capacity-verdict", timeout=60_000)
        assert f"Planned for {SPEC['name']} ({SPEC['key']}" in page.inner_text("#capacity .plan-gpu")
        deployment.refresh_from_db()
        assert deployment.evidence is not None
        assert deployment.evidence["serving_envelope"]["gpu_spec"]["memory_mib"] == SPEC["memory_mib"]
        page.locator("#capacity").scroll_into_view_if_needed()
        recorder.axe(page, "request-custom-gpu")
        recorder.shot(page, "capacity-plan-custom-gpu")

        # 3. the team lead adds a member, makes them a lead, then removes them
        page.click(".topbar >> text=Teams")
        wait_for(page, "h1")
        recorder.axe(page, "teams")
        recorder.shot(page, "teams")
        page.click("main >> text=platform")
        page.fill("#id_username", "newcomer")
        page.click("text=Add to the team")
        wait_for(page, 'tr.member[data-username="newcomer"]')
        page.click('tr.member[data-username="newcomer"] >> text=Make lead')
        wait_for(page, ".message.success")
        assert personas.team.leads.filter(username="newcomer").exists()
        recorder.axe(page, "team")
        recorder.shot(page, "team-newcomer-lead")
        page.click('tr.member[data-username="newcomer"] >> text=Remove from the team')
        page.wait_for_selector('tr.member[data-username="newcomer"]', state="detached")
        assert not personas.team.members.filter(username="newcomer").exists()
        recorder.shot(page, "team-newcomer-removed")
    finally:
        session.close()
