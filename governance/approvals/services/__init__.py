"""Writes for approvals, split by concern. Each runs in one transaction with its audit events.

- certificates: the PKI as stored (init, issue, revoke + CRL, sync with the roles a user holds)
- packet_queue: the packet's input, queueing its render for the current evidence digest (the PDF itself
  is approvals/packet_render.py, its words approvals/packet_content.py)
- packet_jobs: the heavy worker's part: render, sign each recorded decision, store (no lock held meanwhile)
- signoffs: `sign_off`, the one way a reviewer decides on a request, and its refusals
- verifications: verifying a signed packet and storing the result; uploads queued for the heavy worker

Callers import from `governance.approvals.services`; the submodules are the layout, not the API."""

from governance.approvals.services.certificates import (
    Actor,
    certificate_issue,
    certificate_revoke,
    certificates_sync,
    pki_init,
)
from governance.approvals.services.packet_jobs import (
    packet_complete,
    packet_render_failed,
    packet_render_timed_out,
    signoff_sign,
)
from governance.approvals.services.packet_queue import packet_input, packet_queue, packet_render_for_review
from governance.approvals.services.signoffs import SignOffRefused, sign_off, signoff_refuse_locked_out
from governance.approvals.services.verifications import (
    packet_verify,
    verification_job_create,
    verification_job_run,
    verification_job_timed_out,
    verification_jobs_expire,
    verify_bytes,
)

__all__ = [
    "Actor",
    "SignOffRefused",
    "certificate_issue",
    "certificate_revoke",
    "certificates_sync",
    "packet_complete",
    "packet_input",
    "packet_queue",
    "packet_render_failed",
    "packet_render_for_review",
    "packet_render_timed_out",
    "packet_verify",
    "pki_init",
    "sign_off",
    "signoff_refuse_locked_out",
    "signoff_sign",
    "verification_job_create",
    "verification_job_run",
    "verification_job_timed_out",
    "verification_jobs_expire",
    "verify_bytes",
]
