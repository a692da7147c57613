"""Team management forms: a new team's name, a member (or lead) by user name."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from governance.core.names import validate_printed_name


class TeamForm(forms.Form):
    name = forms.CharField(label=_("Team name"), max_length=120, validators=[validate_printed_name])


class TeamMemberForm(forms.Form):
    username = forms.CharField(label=_("User name"), max_length=150, help_text=_("The person's sign-in name."))
    lead = forms.BooleanField(
        label=_("Team lead"),
        required=False,
        help_text=_("Leads manage the team's members and issue its CI tokens."),
    )
