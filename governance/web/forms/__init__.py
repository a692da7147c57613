"""HTML forms: labels, help text and types for the browser. They only shape input into the
dictionaries the services take; the services (and the API's serializers) hold every rule."""

from governance.web.forms.common import apply_error
from governance.web.forms.deployment import (
    EvalRunForm,
    ObligationAckForm,
    ObligationReviewForm,
    ReviewForm,
    UsageForm,
    WaiverForm,
)
from governance.web.forms.teams import TeamForm, TeamMemberForm
from governance.web.forms.tools import AuditFilterForm, CiTokenForm, VerifyForm
from governance.web.forms.wizard import WizardForm

__all__ = [
    "AuditFilterForm",
    "CiTokenForm",
    "EvalRunForm",
    "ObligationAckForm",
    "ObligationReviewForm",
    "ReviewForm",
    "TeamForm",
    "TeamMemberForm",
    "UsageForm",
    "VerifyForm",
    "WaiverForm",
    "WizardForm",
    "apply_error",
]
