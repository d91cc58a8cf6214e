"""Turnscope settings: everything comes from the environment, with embedded defaults.

Unset ``DATABASE_URL`` means SQLite under ``var/``; unset ``REDIS_URL`` means the in-memory
channel layer and a local-memory cache. Both defaults are for one process only.
"""

import os
import secrets
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("TURNSCOPE_VAR_DIR", BASE_DIR / "var"))


def _env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _local_secret_key() -> str:
    # No secret is ever committed: a fresh machine makes its own, kept beside the SQLite file.
    path = VAR_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        path.write_text(key)
        path.chmod(0o600)
        return key


DEBUG = _env_flag("DEBUG")
SECRET_KEY = os.environ.get("SECRET_KEY") or _local_secret_key()
ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "conversations",
    "api",
    "live",
    "proxy",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "turnscope.urls"
WSGI_APPLICATION = "turnscope.wsgi.application"
ASGI_APPLICATION = "turnscope.asgi.application"

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
            ],
        },
    },
]

if os.environ.get("DATABASE_URL"):
    DATABASES = {
        "default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60)
    }
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(VAR_DIR / "turnscope.sqlite3")),
            # Kept open between requests and database_sync_to_async calls: opening one costs
            # more than most of the queries the live path runs on it.
            "CONN_MAX_AGE": 600,
            "OPTIONS": {
                # IMMEDIATE takes the write lock at BEGIN, so concurrent writers wait
                # (busy timeout) instead of failing with "database is locked" mid-transaction.
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 30},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
        }
    }
else:
    # Channels' in-memory layer, sweeping expired messages at most once a second (one process).
    CHANNEL_LAYERS = {"default": {"BACKEND": "live.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "conversation-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

SESSION_COOKIE_HTTPONLY = True
# Every page load and websocket connect reads the session: from the cache (Redis when
# configured), the database only on a miss.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Strict CSP: nothing from other hosts, no inline script. The Google search chip is shown
# in a sandboxed srcdoc iframe, which inherits this policy.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "frame-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
    }
}

REST_FRAMEWORK = {
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": os.environ.get("API_USER_RATE", "600/min"),
        "anon": os.environ.get("API_ANON_RATE", "30/min"),
    },
}
# Ingest and import requests from token clients (bulk imports: a script sending a history
# file by file) have their own, higher rate instead of the write and per-user rates.
API_BULK_IMPORT_RATE = os.environ.get("API_BULK_IMPORT_RATE", "6000/min")

SPECTACULAR_SETTINGS = {
    "TITLE": "Turnscope API",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Size limits for untrusted input.
TURNSCOPE_MAX_UPLOAD_BYTES = int(os.environ.get("TURNSCOPE_MAX_UPLOAD_BYTES", 16 * 1024 * 1024))
DATA_UPLOAD_MAX_MEMORY_SIZE = TURNSCOPE_MAX_UPLOAD_BYTES

# The providers' APIs the recording proxy forwards to (and live calls send to).
TURNSCOPE_UPSTREAM = {
    "anthropic": os.environ.get("TURNSCOPE_UPSTREAM_ANTHROPIC", "https://api.anthropic.com"),
    "openai": os.environ.get("TURNSCOPE_UPSTREAM_OPENAI", "https://api.openai.com"),
    "google": os.environ.get("TURNSCOPE_UPSTREAM_GOOGLE",
                             "https://generativelanguage.googleapis.com"),
}
TURNSCOPE_UPSTREAM_CONNECT_TIMEOUT = float(
    os.environ.get("TURNSCOPE_UPSTREAM_CONNECT_TIMEOUT", 10))
# Per read: a stream may be silent for minutes while the model thinks.
TURNSCOPE_UPSTREAM_READ_TIMEOUT = float(os.environ.get("TURNSCOPE_UPSTREAM_READ_TIMEOUT", 600))
# A proxied request body larger than this is refused (413) and not forwarded.
TURNSCOPE_PROXY_MAX_BODY_BYTES = int(
    os.environ.get("TURNSCOPE_PROXY_MAX_BODY_BYTES", 32 * 1024 * 1024))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # Credentials never reach the log, whatever a message interpolates.
    "filters": {"redact": {"()": "conversations.redaction.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                             "filters": ["redact"]}},
    "loggers": {
        "turnscope": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        # httpx logs each request's URL at INFO, and a proxied Gemini URL may carry ?key=.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}
