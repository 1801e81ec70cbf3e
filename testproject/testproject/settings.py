"""Settings for the runnable test project. Everything environment-specific comes from django-environ.

DATABASE_URL picks the database: unset means a SQLite file beside this project (no server needed);
``postgres://postgres@127.0.0.1:5432/test`` runs against PostgreSQL.
"""

import json
from pathlib import Path

import django
import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

SECRET_KEY = env("SECRET_KEY", default="backwave-testproject-not-secret")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1"])
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "testproject.urls"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",  # the admin's CSS and JS, also for the browser test's live server
    "backwave_django",
    "demo",
    "torture",
    *env.list("EXTRA_APPS", default=[]),  # e.g. "tests" for subprocess workers started by the test suite
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

SQLITE_PATH = env.path("SQLITE_PATH", default=str(BASE_DIR / "testproject.sqlite3"))
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{SQLITE_PATH}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the one writer; IMMEDIATE takes the write lock at BEGIN so that
    # concurrent pumps (threads or processes) wait on busy_timeout instead of failing to upgrade a lock.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(Path(str(SQLITE_PATH)).with_suffix(".test.sqlite3"))}
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=0)

BACKWAVE = {
    "GROUPS": {
        "default": {"QUEUES": ["default", "emails", "reports"], "POLL_INTERVAL": 0.5},
        "torture": {"QUEUES": ["torture", "torture-limited"]},  # the torture run's own group
    },
    "MANIFEST_PATH": str(BASE_DIR / "backwave_manifest.txt"),
    "SCHEDULES": {
        "nightly-report": {
            "JOB": "demo.nightly-report",
            "CRON": "0 3 * * *",
            "TIMEZONE": "Europe/Paris",
            "MISFIRE": "coalesce",
            "NO_OVERLAP": True,
        },
    },
}
if django.VERSION >= (6, 0):  # Django's Tasks framework, on backwave (backwave_django.tasks)
    TASKS = {
        "default": {
            "BACKEND": "backwave_django.tasks.BackwaveBackend",
            "QUEUES": ["default", "emails", "reports"],
        }
    }
# Tests and the torture run start worker processes with other settings: BACKWAVE_JSON replaces the dict.
if env.str("BACKWAVE_JSON", default=""):
    BACKWAVE = {**json.loads(env.str("BACKWAVE_JSON")), "MANIFEST_PATH": BACKWAVE["MANIFEST_PATH"]}

# Behind a pooler in transaction mode (docs/howto/deploy.md, "PgBouncer"): BACKWAVE_PREPARED_STATEMENTS=0 for
# PgBouncer before 1.21, and LISTEN_DATABASE_URL for the hint listener's direct connection to that database.
if env.str("LISTEN_DATABASE_URL", default=""):
    DATABASES["listen"] = env.db("LISTEN_DATABASE_URL")
    BACKWAVE["LISTEN_DATABASE"] = "listen"
if env.str("BACKWAVE_PREPARED_STATEMENTS", default=""):
    BACKWAVE["PREPARED_STATEMENTS"] = env.bool("BACKWAVE_PREPARED_STATEMENTS")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"backwave": {"handlers": ["console"], "level": env("BACKWAVE_LOG_LEVEL", default="INFO")}},
}
