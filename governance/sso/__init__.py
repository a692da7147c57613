"""Single sign-on through the company's OpenID Connect provider (mozilla-django-oidc): users from
ID tokens, roles and teams from their group claim, step-up re-authentication for signing."""
