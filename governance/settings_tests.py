"""Settings for the test suite: the production settings, with a throwaway SECRET_KEY when none is given."""

import os

os.environ.setdefault("SECRET_KEY", "tests-only-secret-key-" + "x" * 40)
os.environ.setdefault("APPROVALS_KEY_ENCRYPTION_KEY", "tests-only-key-encryption-key-" + "k" * 32)

from governance.settings import *  # noqa: F403

# Fast hashing: the suite creates many users; production keeps the default PBKDF2.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405

# A worker process started by the tests must reach the same test database, so an SQLite test
# database lives in a file rather than in memory.
if str(DATABASES["default"]["ENGINE"]).endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}  # noqa: F405

# The test client speaks plain HTTP; the deploy check test covers the production values.
SECURE_SSL_REDIRECT = False
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405
