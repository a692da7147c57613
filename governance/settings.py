"""Django settings, read from the environment (every variable: docs/configuration.md).

Embedded defaults need no server: SQLite under var/ and kombu's filesystem broker.
Production points DATABASE_URL at PostgreSQL and CELERY_BROKER_URL at Redis.
"""

from __future__ import annotations

import ipaddress
import json
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from whitenoise.compress import Compressor  # type: ignore[import-untyped]

from governance.core.env import env_bool, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("GOVERNANCE_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)

# Only a DEBUG instance may run on the well-known development key.
_DEV_SECRET_KEY = "django-insecure-development-only-key-never-use-in-production-0123456789"  # noqa: S105
SECRET_KEY = env_secret("SECRET_KEY", _DEV_SECRET_KEY if DEBUG else None)
if not DEBUG and SECRET_KEY == _DEV_SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must not be the development key when DEBUG is off")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "governance.core",
    "governance.audit",
    "governance.licenses",
    "governance.capacity",
    "governance.artifacts",
    "governance.deployments",
    "governance.evaluations",
    "governance.approvals",
    "governance.calibration",
    "governance.quantization",
    "governance.canary",
    "governance.gate",
    "governance.observability",
    "governance.sso",
    "governance.web",
]

MIDDLEWARE = [
    "governance.core.middleware.RequestIdMiddleware",
    "governance.core.middleware.RequestSizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "governance.core.middleware.SecurityHeadersMiddleware",
    # A django-ratelimit block (login posts, web sign-offs) answers 429 through RATELIMIT_VIEW.
    "django_ratelimit.middleware.RatelimitMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "governance.urls"
WSGI_APPLICATION = "governance.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "governance.web.context.navigation",
            ],
        },
    },
]


def _database_config() -> dict[str, object]:
    url = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'governance.sqlite3'}")
    try:
        config: dict[str, object] = dict(dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True))
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
    engine = str(config["ENGINE"])
    if engine not in {"django.db.backends.postgresql", "django.db.backends.sqlite3"}:
        raise ImproperlyConfigured(f"DATABASE_URL must be postgres:// or sqlite://, got engine {engine}")
    if engine.endswith("sqlite3"):
        # BEGIN IMMEDIATE takes the write lock up front, so concurrent writers queue instead of
        # failing with "database is locked" half-way through a transaction.
        config["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 30}
        config["CONN_MAX_AGE"] = 0
        name = str(config.get("NAME") or "")
        if name and name != ":memory:":
            Path(name).parent.mkdir(parents=True, exist_ok=True)
    else:
        # Django's cursors bind on the client and never prepare; a threshold no statement reaches
        # enables psycopg's prepared statements only where a hot read asks for one (core.prepared).
        options = dict(config.get("OPTIONS") or {})  # type: ignore[call-overload]
        options.setdefault("prepare_threshold", 2**31 - 1)
        config["OPTIONS"] = options
    return config


DATABASES = {"default": _database_config()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
# The UI speaks English and Simplified Chinese; LocaleMiddleware picks from the session's choice
# (the language switcher), then Accept-Language. Catalogs are compiled at build time (compilemessages).
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
USE_THOUSAND_SEPARATOR = True
# One date and one date-and-time format per language (governance/formats/<locale>/formats.py).
FORMAT_MODULE_PATH = ["governance.formats"]

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG
# Source maps (the vendored Redoc, Swagger UI and Bootstrap bundles': 14 of the 27 MB collected, hashed and
# unhashed copies together) are fetched only by a browser's developer tools, so they are served as they
# are rather than gzipped and Brotli-compressed at collectstatic: that halves the image's collectstatic
# step (33 s -> 17 s on the 2-core CI machine) and its output (42 -> 36 MB).
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")
# Only the hashed names are kept (and compressed): every page names its files through {% static %},
# which gives the hashed name under the manifest storage, and an unhashed copy is never asked for.
# Compressing both copies was half of collectstatic's CPU (18 s of it on the 2-core CI machine).
WHITENOISE_KEEP_ONLY_HASHED_FILES = True
MEDIA_ROOT = VAR_DIR / "media"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "web:dashboard"
LOGOUT_REDIRECT_URL = "login"

# --- security (production defaults; `manage.py check --deploy` is clean with DEBUG off) ---
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Content-Security-Policy (django-csp): everything from this origin, no inline script, no framing.
# The UI's assets are vendored, so nothing needs another origin.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Request bodies larger than API_MAX_BODY_BYTES (below) answer 413 before any view reads them; a
# path listed here has a smaller limit of its own (the gate reads a few hundred bytes).
REQUEST_MAX_BYTES_BY_PATH = {"/api/v1/gate/check": 64 * 1024}
# The gate denies a check without serving.engine_version when the approved evals recorded the
# version they served (`serving.engine_version_missing`, docs/gate.md); false keeps it optional.
GATE_REQUIRE_ENGINE_VERSION = env_bool("GATE_REQUIRE_ENGINE_VERSION", True)
# Paths that take a packet upload: their body may be APPROVALS_MAX_UPLOAD_BYTES plus the multipart
# framing (and the web form's CSRF field), no more: a larger one answers 413 before it is read.
UPLOAD_BOUND_PATHS = frozenset({"/api/v1/approvals/verify", "/verify/"})
UPLOAD_FRAMING_BYTES = 64 * 1024
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000

# Login: django-axes locks a username+address out after repeated failures (and records them);
# django-ratelimit throttles login posts per address on top.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # ModelBackend, whose per-request user look-up also reads the user's roles (one query, not two)
    "governance.core.backends.RoleModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
LOGIN_RATE = env_str("LOGIN_RATE", "30/m")
# Sign-offs re-enter the password: attempts per user, for the API (DRF) and the web form (django-ratelimit).
SIGNOFF_RATE = env_str("SIGNOFF_THROTTLE_RATE", "10/m")
# Verifying an uploaded packet costs CPU: uploads per user, API and web form counted together.
VERIFY_RATE = env_str("VERIFY_THROTTLE_RATE", "20/m")
RATELIMIT_VIEW = "governance.core.middleware.too_many_requests"

# Throttle counters live in the cache: Redis when configured, shared by every worker process.
_CACHE_URL = env_str("CACHE_URL", "")
if _CACHE_URL and not _CACHE_URL.startswith(("redis://", "rediss://")):
    raise ImproperlyConfigured("CACHE_URL must be redis:// or rediss://")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _CACHE_URL}
        if _CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    ),
}

# Sessions: with a shared cache, read from it and written through to the database (cached_db), so a
# page's session costs no query; without one, a per-process cache would serve stale sessions (a
# logout in one worker, still signed in in another): the database alone.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db" if _CACHE_URL else "django.contrib.sessions.backends.db"

if SECURE_HSTS_SECONDS == 0 and not DEBUG:
    SILENCED_SYSTEM_CHECKS = ["security.W004"]

# --- REST API ---
# Hostile-input limits, enforced by governance.core.parsers.SafeJSONParser. The body limit is sized for the
# advertised eval_set upload (up to 20 MB of JSONL, escaped inside a JSON string) with room to spare.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 48 * 1024 * 1024, minimum=1024)
API_MAX_JSON_DEPTH = env_int("API_MAX_JSON_DEPTH", 64, minimum=4, maximum=500)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES  # Django's own check (request.body, forms) agrees with the API
REST_FRAMEWORK = {
    "DEFAULT_PARSER_CLASSES": [
        "governance.core.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "governance.core.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["governance.core.permissions.HasAnyRole"],
    "DEFAULT_PAGINATION_CLASS": "governance.core.pagination.DefaultPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["governance.core.filters.StrictFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "governance.core.exceptions.api_exception_handler",
    # Per token for the gate, per user for issuing CI tokens (views pick their scope).
    "DEFAULT_THROTTLE_RATES": {
        "gate": env_str("GATE_THROTTLE_RATE", "120/minute"),
        "tokens": env_str("TOKEN_THROTTLE_RATE", "30/hour"),
        "signoff": SIGNOFF_RATE,
        "verify": VERIFY_RATE,
    },
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Model-license and deployment-readiness governance API",
    "DESCRIPTION": "License evaluation, capacity plans, eval runs, approvals, audit trail and the CI gate.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Several models have a `status` or `decision`: name their enums so the schema's names stay stable.
    "ENUM_NAME_OVERRIDES": {
        "SignOffDecisionEnum": "governance.deployments.choices.SignOffDecision",
        "CalibrationStatusEnum": "governance.calibration.models.CalibrationStatus",
        "CanaryStatusEnum": "governance.canary.models.CanaryStatus",
        "CanaryDecisionEnum": [("promote", "promote"), ("roll_back", "roll_back")],
        # A serving plan's and the gate's engine and precision (the planner's inputs have their own).
        "ServingEngineEnum": "governance.deployments.choices.ENGINE_CHOICES",
        "ServingPrecisionEnum": "governance.deployments.choices.SERVING_PRECISIONS",
    },
}

# --- Celery ---
_BROKER_DIR = VAR_DIR / "celery-broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.split("://", 1)[0] not in {"redis", "rediss", "filesystem", "memory"}:
    raise ImproperlyConfigured("CELERY_BROKER_URL must be redis://, rediss:// or filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's filesystem transport: producers write messages into one folder, workers read it.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "queue"),
        "data_folder_out": str(_BROKER_DIR / "queue"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        "store_processed": False,
        # Broadcast (remote control) exchanges; kombu's default is ./control in the working directory.
        "control_folder": str(_BROKER_DIR / "control"),
    }
    for _folder in ("queue", "processed", "control"):
        (_BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
CELERY_RESULT_BACKEND = env_str(
    "CELERY_RESULT_BACKEND",
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else f"file://{VAR_DIR / 'celery-results'}",
)
if CELERY_RESULT_BACKEND.startswith("file://"):
    Path(CELERY_RESULT_BACKEND.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A task is acknowledged only after it ran, so a worker killed mid-task has it redelivered.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}
# Heavy planner work has a queue and a worker of its own (governance.celery.route_task).
CELERY_HEAVY_QUEUE = env_str("CELERY_HEAVY_QUEUE", "heavy")
CELERY_TASK_ROUTES = ("governance.celery.route_task",)
# Every task declares its own soft/hard time limits (@shared_task); these cover any that forgets.
CELERY_TASK_SOFT_TIME_LIMIT = 300
CELERY_TASK_TIME_LIMIT = 360

# --- cluster executor: "local" runs eval payloads as subprocesses on this host ---
GOVERNANCE_DEFAULT_EXECUTOR = env_str("GOVERNANCE_DEFAULT_EXECUTOR", "local")
if GOVERNANCE_DEFAULT_EXECUTOR not in {"local", "slurm"}:
    raise ImproperlyConfigured("GOVERNANCE_DEFAULT_EXECUTOR must be 'local' or 'slurm'")

# --- logging: one JSON object per line, with the request id of the HTTP request ---
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL must be a logging level name, got {LOG_LEVEL!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "governance.core.logging.RequestIdFilter"}},
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json", "filters": ["request_id"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # fontTools logs every glyph it subsets (PDF stamps) at INFO; weasyprint its font fallbacks.
    "loggers": {name: {"level": "WARNING"} for name in ("django.db.backends", "fontTools", "weasyprint", "axes")},
}

# --- transactional outbox (governance.core.outbox) ---
# A sent task unacknowledged this long is sent again: longer than any task's hard time limit.
OUTBOX_LEASE_S = env_int("OUTBOX_LEASE_S", 660, minimum=2)
OUTBOX_SEND_GRACE_S = env_int("OUTBOX_SEND_GRACE_S", 10, minimum=0)  # the after-commit send's head start
OUTBOX_MAX_ATTEMPTS = env_int("OUTBOX_MAX_ATTEMPTS", 20, minimum=1)
OUTBOX_FLUSH_BATCH = 500
# How often beat re-sends stalled work (the outbox, capacity plans, job polling); a test stack may
# shorten it to see recovery in seconds.
RESUME_INTERVAL_S = float(env_int("RESUME_INTERVAL_S", 15, minimum=1))
CELERY_BEAT_SCHEDULE["outbox-flush"] = {"task": "core.outbox_flush", "schedule": RESUME_INTERVAL_S}

# --- single sign-on: OpenID Connect (mozilla-django-oidc; docs/access.md, "Single sign-on") ---
OIDC_ISSUER = env_str("OIDC_ISSUER", "")
SSO_ENABLED = bool(OIDC_ISSUER)
# Off: nobody signs in (or signs off) with a local password; only through the provider.
LOCAL_LOGIN_ENABLED = env_bool("LOCAL_LOGIN_ENABLED", True)
if not LOCAL_LOGIN_ENABLED and not SSO_ENABLED:
    raise ImproperlyConfigured("LOCAL_LOGIN_ENABLED=false needs single sign-on: set OIDC_ISSUER")
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_JWKS_ENDPOINT", "")
# Never called (sso.backends.OidcBackend.get_userinfo reads the ID token's claims), but
# mozilla-django-oidc's backend refuses to start without the setting: it stays, empty.
OIDC_OP_USER_ENDPOINT = ""
OIDC_OP_LOGOUT_ENDPOINT = env_str("OIDC_END_SESSION_ENDPOINT", "")  # empty: sign-out ends only our session
if SSO_ENABLED:
    _missing = [
        name
        for name, value in (
            ("OIDC_CLIENT_ID", OIDC_RP_CLIENT_ID),
            ("OIDC_CLIENT_SECRET", OIDC_RP_CLIENT_SECRET),
            ("OIDC_AUTHORIZATION_ENDPOINT", OIDC_OP_AUTHORIZATION_ENDPOINT),
            ("OIDC_TOKEN_ENDPOINT", OIDC_OP_TOKEN_ENDPOINT),
            ("OIDC_JWKS_ENDPOINT", OIDC_OP_JWKS_ENDPOINT),
        )
        if not value
    ]
    if _missing:
        raise ImproperlyConfigured(f"OIDC_ISSUER is set: also set {', '.join(_missing)}")
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
OIDC_USE_PKCE = True
OIDC_STORE_ID_TOKEN = True  # the id_token_hint of the provider's logout
OIDC_OP_LOGOUT_URL_METHOD = "governance.sso.views.provider_logout_url"
# A private CA's certificate file for the provider's TLS, or true (the system's trust store).
_OIDC_CA = env_str("OIDC_CA_BUNDLE", "")
OIDC_VERIFY_SSL: bool | str = _OIDC_CA or True
OIDC_TIMEOUT = 10
LOGIN_REDIRECT_URL_FAILURE = "login"
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")


def _json_map(name: str) -> dict[str, str]:
    """A JSON object of strings from the environment, e.g. {"gov-legal": "legal_reviewer"}."""
    raw = env_str(name, "{}")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a JSON object: {exc}") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ImproperlyConfigured(f'{name} must be a JSON object of strings, e.g. {{"idp-group": "value"}}')
    return value


# Group claim value -> role (one of governance.core.roles.Role) and -> team name (docs/access.md).
OIDC_ROLE_GROUPS = _json_map("OIDC_ROLE_GROUPS")
OIDC_TEAM_GROUPS = _json_map("OIDC_TEAM_GROUPS")
# A sign-off under SSO needs a provider sign-in (step-up) no older than this.
SSO_STEP_UP_MAX_AGE_S = env_int("SSO_STEP_UP_MAX_AGE_S", 300, minimum=30, maximum=3600)
# An SSO session lasts at most this long: roles follow the provider's groups at each sign-in, so
# this bounds how long someone removed at the provider keeps access here.
SSO_SESSION_MAX_AGE_S = env_int("SSO_SESSION_MAX_AGE_S", 8 * 3600, minimum=300, maximum=14 * 24 * 3600)
if SSO_ENABLED:
    AUTHENTICATION_BACKENDS.append("governance.sso.backends.OidcBackend")
if not LOCAL_LOGIN_ENABLED:
    AUTHENTICATION_BACKENDS = [
        "governance.sso.backends.SessionOnlyBackend" if b.endswith("RoleModelBackend") else b
        for b in AUTHENTICATION_BACKENDS
    ]

# --- metrics (/metrics for Prometheus; docs/operations.md) ---
# A scrape presents METRICS_TOKEN as a bearer token, or comes from one of METRICS_ALLOWED_NETWORKS
# (CIDRs, matched against the connecting address). Neither set: nobody may scrape.
METRICS_TOKEN = env_secret("METRICS_TOKEN", "")


def _networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an IP network (e.g. 10.0.0.0/8)") from None
    return networks


METRICS_ALLOWED_NETWORKS = _networks("METRICS_ALLOWED_NETWORKS")

# --- deployments ---
DEPLOYMENT_APPROVAL_VALIDITY_DAYS = env_int("DEPLOYMENT_APPROVAL_VALIDITY_DAYS", 180, minimum=1, maximum=3650)
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "governance@localhost")
CELERY_BEAT_SCHEDULE["deployments-expire"] = {"task": "deployments.expire", "schedule": 300.0}

# --- capacity plans ---
# A worker's claim on a plan lapses after this long (it must outlast the task's hard time limit);
# a plan still pending then is computed again by a redelivery or beat's re-send.
CAPACITY_PLAN_LEASE_S = env_int("CAPACITY_PLAN_LEASE_S", 600, minimum=5)
CAPACITY_PLAN_SEND_GRACE_S = env_int("CAPACITY_PLAN_SEND_GRACE_S", 60, minimum=0)  # unsent this long: beat sends it
CELERY_BEAT_SCHEDULE["capacity-resume"] = {"task": "capacity.resume", "schedule": max(RESUME_INTERVAL_S, 5.0)}

# --- cluster jobs ---
JOB_POLL_INITIAL_S = float(env_int("JOB_POLL_INITIAL_S", 2, minimum=1))
JOB_POLL_MAX_S = float(env_int("JOB_POLL_MAX_S", 60, minimum=1))
JOB_LOST_GRACE_S = env_int("JOB_LOST_GRACE_S", 30, minimum=0)
JOB_RETRY_GRACE_S = env_int("JOB_RETRY_GRACE_S", 30, minimum=0)
CELERY_BEAT_SCHEDULE["jobs-resume"] = {"task": "jobs.resume", "schedule": max(RESUME_INTERVAL_S, 5.0)}
# The interpreter that runs quantize jobs on the `local` cluster: llm-compressor 0.14 pins transformers
# <=5.17, so it lives in its own environment (pip install -e '.[quantize]'); empty = the cluster's python.
QUANTIZE_PYTHON = env_str("QUANTIZE_PYTHON", "")
CELERY_BEAT_SCHEDULE["quantize-reconcile"] = {"task": "quantize.reconcile", "schedule": max(RESUME_INTERVAL_S, 5.0)}

# --- audit trail ---
AUDIT_ORIGIN = env_str("AUDIT_ORIGIN", "governance")
AUDIT_SIGNING_KEY_PATH = env_str("AUDIT_SIGNING_KEY_PATH", str(VAR_DIR / "keys" / "audit-ed25519.pem"))
# Checkpoints are also appended here (outside the database); empty disables it.
AUDIT_CHECKPOINT_PUBLISH_PATH = env_str("AUDIT_CHECKPOINT_PUBLISH_PATH", str(VAR_DIR / "audit-checkpoints.jsonl"))
AUDIT_CHECKPOINT_INTERVAL_S = env_int("AUDIT_CHECKPOINT_INTERVAL_S", 300, minimum=10)
# Write services run again this many times in all when PostgreSQL rolls them back as a deadlock or
# serialization-failure victim (governance.core.services.write_service).
SERVICE_RETRY_ATTEMPTS = 4
CELERY_BEAT_SCHEDULE["audit-checkpoint"] = {
    "task": "audit.checkpoint",
    "schedule": float(AUDIT_CHECKPOINT_INTERVAL_S),
}

# --- approvals: the organisation's PKI and signed PDF packets ---
APPROVALS_ORGANISATION = env_str("APPROVALS_ORGANISATION", "Governance")
# Encrypts every private key of the PKI at rest; from the variable or a mounted `_FILE` secret.
# Unset: a DEBUG instance generates one in APPROVALS_KEK_PATH (`manage.py pki_init`); production refuses.
APPROVALS_KEY_ENCRYPTION_KEY = env_secret("APPROVALS_KEY_ENCRYPTION_KEY", "")
APPROVALS_KEK_PATH = env_str("APPROVALS_KEK_PATH", str(VAR_DIR / "keys" / "approvals-kek"))
APPROVALS_MAX_UPLOAD_BYTES = env_int("APPROVALS_MAX_UPLOAD_BYTES", 20 * 1024 * 1024, minimum=1024)
# Rendering and signing a packet run in the heavy worker under this soft limit (the hard limit is
# 30 s more); a render past it fails naming the longest text field (docs/approvals.md).
# Bounds on verifying an uploaded packet (governance/approvals/verification.py VerifyLimits): a file
# over one is refused with 400 before any signature is validated.
APPROVALS_VERIFY_MAX_SIGNATURES = env_int("APPROVALS_VERIFY_MAX_SIGNATURES", 4, minimum=2)
APPROVALS_VERIFY_MAX_REVISIONS = env_int("APPROVALS_VERIFY_MAX_REVISIONS", 6, minimum=4)
APPROVALS_VERIFY_MAX_EVIDENCE_BYTES = env_int("APPROVALS_VERIFY_MAX_EVIDENCE_BYTES", 8 * 1024 * 1024, minimum=65536)
APPROVALS_RENDER_SOFT_TIME_LIMIT_S = env_int("APPROVALS_RENDER_SOFT_TIME_LIMIT_S", 60, minimum=5)
# An uploaded file is verified by the heavy worker, never in a web request: the API answers 202 and a
# status URL. The task's soft limit (hard limit 10 s later) ends a verification as `failed` naming
# it; a user has at most APPROVALS_VERIFY_MAX_PENDING files waiting; the bytes are deleted when the
# worker is done with them, a job no worker took is failed after APPROVALS_VERIFY_JOB_EXPIRE_S, and
# the job rows (not the stored verification) are deleted after APPROVALS_VERIFY_JOB_KEEP_S.
APPROVALS_VERIFY_SOFT_TIME_LIMIT_S = env_int("APPROVALS_VERIFY_SOFT_TIME_LIMIT_S", 30, minimum=1)
APPROVALS_VERIFY_MAX_PENDING = env_int("APPROVALS_VERIFY_MAX_PENDING", 3, minimum=1)
APPROVALS_VERIFY_JOB_EXPIRE_S = env_int("APPROVALS_VERIFY_JOB_EXPIRE_S", 900, minimum=60)
APPROVALS_VERIFY_JOB_KEEP_S = env_int("APPROVALS_VERIFY_JOB_KEEP_S", 86400, minimum=60)
CELERY_BEAT_SCHEDULE["approvals-verifications-expire"] = {"task": "approvals.verifications_expire", "schedule": 60.0}

# --- canary: a high-risk production rollout needs a passed canary analysis (docs/canary.md) ---
CANARY_ENVIRONMENTS = env_list("CANARY_ENVIRONMENTS", ["production"])
# Bounds of one analysis: cases sent to the canary, seconds per HTTP request, Prometheus window.
CANARY_MAX_CASES = env_int("CANARY_MAX_CASES", 200, minimum=1)
CANARY_HTTP_TIMEOUT_S = env_int("CANARY_HTTP_TIMEOUT_S", 60, minimum=1)
CANARY_ANALYSIS_SOFT_TIME_LIMIT_S = env_int("CANARY_ANALYSIS_SOFT_TIME_LIMIT_S", 900, minimum=10)
# The Prometheus server the analysis queries (empty: no metric checks are possible: each is failed).
CANARY_PROMETHEUS_URL = env_str("CANARY_PROMETHEUS_URL", "")
CANARY_METRICS_WINDOW_S = env_int("CANARY_METRICS_WINDOW_S", 600, minimum=60)
CELERY_BEAT_SCHEDULE["canary-resume"] = {"task": "canary.resume", "schedule": 120.0}
# The fleet after promotion (docs/canary.md): a beat task re-checks each promoted deployment's series
# over the last FLEET_WINDOW_S (FLEET_STEP_S apart); a figure beyond the plan in at least
# FLEET_SUSTAINED_FRACTION of them is sustained: an alert (/metrics + a notification). Sending the
# request back to review on an alert is the organisation's choice: off unless set.
FLEET_CHECK_INTERVAL_S = env_int("FLEET_CHECK_INTERVAL_S", 300, minimum=10)
FLEET_WINDOW_S = env_int("FLEET_WINDOW_S", 900, minimum=10)
FLEET_STEP_S = env_int("FLEET_STEP_S", 15, minimum=1)
FLEET_SUSTAINED_FRACTION = env_int("FLEET_SUSTAINED_PERCENT", 80, minimum=1) / 100
FLEET_SEND_BACK_TO_REVIEW = env_bool("FLEET_SEND_BACK_TO_REVIEW", False)
CELERY_BEAT_SCHEDULE["canary-fleet-check"] = {"task": "canary.fleet_check", "schedule": float(FLEET_CHECK_INTERVAL_S)}
