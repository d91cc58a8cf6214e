"""Turnscope settings: everything comes from the environment, with embedded defaults.

Unset ``DATABASE_URL`` means SQLite under ``var/``; unset ``REDIS_URL`` means the in-memory
channel layer and a local-memory cache. Both defaults are for one process only.
"""

import os
import secrets
from pathlib import Path

import dj_database_url

from upstream.hosts import parse_upstreams

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
# The pages that may open a websocket, exactly (scheme://host[:port]); unset means the origin
# the websocket itself is opened on (its scheme and Host, an allowed host). See live.origins.
TURNSCOPE_ALLOWED_ORIGINS = [
    o.strip() for o in os.environ.get("TURNSCOPE_ALLOWED_ORIGINS", "").split(",") if o.strip()
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
    "otlp",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "turnscope.security.PrivateCacheMiddleware",
    "turnscope.security.ReportingEndpointsMiddleware",
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
                "live.context_processors.live_calls",
                "live.context_processors.capture_backlog",
                "conversations.context_processors.sharing",
            ],
        },
    },
]

if os.environ.get("DATABASE_URL"):
    DATABASES = {
        # A kept connection is checked before a request reuses it (one cheap query): after a
        # database restart the first request gets a new one instead of an error.
        "default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60,
                                         conn_health_checks=True)
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
                # A 16 MB page cache per connection (SQLite's default is 2 MB): a search or
                # a filter reads a few thousand scattered index and row pages, and past the
                # cache each is a read from the OS. At 100k conversations the admin's search
                # of sources for a word in 3,125 of them: 7.8 -> 4.4 ms.
                # Temporary files in memory: a statement that fires the FTS triggers (search
                # docs, sources) keeps a statement journal, which spilled to a new file under
                # /var/tmp, written, then unlinked, once or more per conversation stored: kernel
                # time an import paid per conversation.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                                "PRAGMA cache_size=-16384; PRAGMA temp_store=MEMORY;",
            },
            # Tests get a file too, not Django's default shared-cache memory database: there a
            # second thread (the live runner's, a proxy's) meets "table is locked" at once
            # instead of waiting out the busy timeout, which made threaded tests flaky.
            "TEST": {"NAME": os.environ.get("SQLITE_TEST_PATH",
                                            str(VAR_DIR / "test-turnscope.sqlite3"))},
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
            # Redis down or hung: fail fast, and everything that uses the cache falls back.
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
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
# Failed logins per client address and username (turnscope.auth), and live replays started
# per user (live.views): "N/period", period s, min, hour or day, e.g. "10/15min".
AUTHENTICATION_BACKENDS = ["turnscope.auth.LoginRateLimit",
                           "django.contrib.auth.backends.ModelBackend"]
TURNSCOPE_LOGIN_FAILURES = os.environ.get("TURNSCOPE_LOGIN_FAILURES", "10/15min")
TURNSCOPE_REPLAY_RATE = os.environ.get("TURNSCOPE_REPLAY_RATE", "10/min")
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


def _proxy_ssl_header(value: str) -> tuple[str, str] | None:
    # "X-Forwarded-Proto,https" (or Django's form, "HTTP_X_FORWARDED_PROTO,https").
    if not value.strip():
        return None
    name, sep, secure = value.partition(",")
    if not sep or not name.strip() or not secure.strip():
        raise ValueError("SECURE_PROXY_SSL_HEADER must look like X-Forwarded-Proto,https")
    key = name.strip().upper().replace("-", "_")
    return (key if key.startswith("HTTP_") else f"HTTP_{key}", secure.strip())


# HTTPS deployments (all off by default: the demo serves plain HTTP on 127.0.0.1). Behind a
# proxy that terminates TLS, SECURE_PROXY_SSL_HEADER says which header tells HTTPS requests
# apart (the proxy must set it, and strip it from what clients send); README: Deployment.
SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(os.environ.get("SECURE_PROXY_SSL_HEADER", ""))
SECURE_SSL_REDIRECT = _env_flag("SECURE_SSL_REDIRECT")
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0") or 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_flag("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = _env_flag("SECURE_HSTS_PRELOAD")
SESSION_COOKIE_SECURE = _env_flag("SESSION_COOKIE_SECURE")
CSRF_COOKIE_SECURE = _env_flag("CSRF_COOKIE_SECURE")
# Sessions live in the database alone: a Redis outage must not log everyone out or fail every
# request (cached_db raises when its cache does), and a logout during one must not leave the
# session valid in a cache that comes back. One primary-key read per request.
SESSION_ENGINE = "django.contrib.sessions.backends.db"
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Strict CSP: nothing from other hosts, no inline script or style. The Google search chip is
# a sandboxed iframe of its own URL, served with its own policy (conversations.views.
# search_entry_point).
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
        # Violations are reported to the app (turnscope.security.csp_report), where they are
        # logged; report-to names the Reporting-Endpoints group, report-uri is for the rest.
        "report-uri": ["/csp-report/"],
        "report-to": "csp",
    }
}
TURNSCOPE_CSP_REPORTS_PER_MINUTE = int(os.environ.get("TURNSCOPE_CSP_REPORTS_PER_MINUTE", 60))

REST_FRAMEWORK = {
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": [
        "api.throttling.UserRateThrottle",
        "api.throttling.AnonRateThrottle",
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
    # No deep links: with them each operation's path is a link inside its summary button
    # (nested interactive controls, which a screen reader cannot reach).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
}

# Live calls (composer, re-run, API) per user: started per period, and streaming at once.
TURNSCOPE_LIVE_CALL_RATE = os.environ.get("TURNSCOPE_LIVE_CALL_RATE", "20/min")
TURNSCOPE_LIVE_CALLS_CONCURRENT = int(os.environ.get("TURNSCOPE_LIVE_CALLS_CONCURRENT", 3))

# serve --proxy-headers: the proxies in front whose X-Forwarded-For is believed, read from the
# right: a number of hops, or their addresses / networks, comma-separated (live.forwarded).
TURNSCOPE_TRUSTED_PROXIES = os.environ.get("TURNSCOPE_TRUSTED_PROXIES", "1")

# Size limits for untrusted input.
TURNSCOPE_MAX_UPLOAD_BYTES = int(os.environ.get("TURNSCOPE_MAX_UPLOAD_BYTES", 16 * 1024 * 1024))
DATA_UPLOAD_MAX_MEMORY_SIZE = TURNSCOPE_MAX_UPLOAD_BYTES
# Imports (upload page, the API's import and ingest): per file and per upload.
TURNSCOPE_IMPORT_MAX_FILE_BYTES = int(
    os.environ.get("TURNSCOPE_IMPORT_MAX_FILE_BYTES", 256 * 1024 * 1024))
TURNSCOPE_IMPORT_MAX_BYTES = int(os.environ.get("TURNSCOPE_IMPORT_MAX_BYTES", 512 * 1024 * 1024))

# Live calls to a provider without a key go to the built-in recorded provider here (the bundled
# samples in the providers' wire formats; ``manage.py demo`` serves it at /recorded). "": none.
TURNSCOPE_RECORDED_UPSTREAM = os.environ.get("TURNSCOPE_RECORDED_UPSTREAM", "")
# The capture log (live.capture): each proxied chunk is committed there before the app gets it
# (off: only queued, in order, which spares the forwarding the commit's round trip; a process
# killed may then have forwarded its last milliseconds without them), and how many exchanges are
# recorded at a time (the rest wait in the log).
TURNSCOPE_CAPTURE_WAIT = os.environ.get("TURNSCOPE_CAPTURE_WAIT", "1") not in ("0", "false", "")
TURNSCOPE_RECORDING_SLOTS = int(os.environ.get("TURNSCOPE_RECORDING_SLOTS", "16"))
# Recorder processes ``serve`` starts beside itself to record the capture log on other cores
# (proxy.recorders): "auto" is one on PostgreSQL with two cores or more, else none.
TURNSCOPE_RECORDERS = os.environ.get("TURNSCOPE_RECORDERS", "auto")

# A conversation page shows this many turns (the newest; "Earlier turns" loads more).
# Read-only links to conversations (``/s/<token>/``); 0 turns them off for the instance.
TURNSCOPE_SHARING = _env_flag("TURNSCOPE_SHARING", True)
TURNSCOPE_PAGE_TURNS = max(1, int(os.environ.get("TURNSCOPE_PAGE_TURNS", 50)))

# The providers' APIs the recording proxy forwards to (and live calls send to).
TURNSCOPE_UPSTREAM = {
    "anthropic": os.environ.get("TURNSCOPE_UPSTREAM_ANTHROPIC", "https://api.anthropic.com"),
    "openai": os.environ.get("TURNSCOPE_UPSTREAM_OPENAI", "https://api.openai.com"),
    "google": os.environ.get("TURNSCOPE_UPSTREAM_GOOGLE",
                             "https://generativelanguage.googleapis.com"),
    # Azure OpenAI: the resource's endpoint (the Azure SDK's own variable when ours is unset).
    "azure": os.environ.get("TURNSCOPE_UPSTREAM_AZURE", "")
    or os.environ.get("AZURE_OPENAI_ENDPOINT", ""),
    # Vertex AI: unset, each request goes to the regional endpoint its path names.
    "vertex": os.environ.get("TURNSCOPE_UPSTREAM_VERTEX", ""),
}
# Named OpenAI-compatible upstreams, /proxy/<name>/: "xai=https://api.x.ai,groq=...".
TURNSCOPE_UPSTREAMS = parse_upstreams(os.environ.get("TURNSCOPE_UPSTREAMS", ""))
TURNSCOPE_UPSTREAM_CONNECT_TIMEOUT = float(
    os.environ.get("TURNSCOPE_UPSTREAM_CONNECT_TIMEOUT", 10))
# Per read: a stream may be silent for minutes while the model thinks.
TURNSCOPE_UPSTREAM_READ_TIMEOUT = float(os.environ.get("TURNSCOPE_UPSTREAM_READ_TIMEOUT", 600))
# Live calls: how many times one agent turn is continued after ``pause_turn`` before the runner
# stops and says so (the loop guard).
TURNSCOPE_MAX_CONTINUATIONS = int(os.environ.get("TURNSCOPE_MAX_CONTINUATIONS", 5))
# A proxied request body larger than this is refused (413) and not forwarded.
TURNSCOPE_PROXY_MAX_BODY_BYTES = int(
    os.environ.get("TURNSCOPE_PROXY_MAX_BODY_BYTES", 32 * 1024 * 1024))
# The OTLP receiver (/otlp/v1/traces): the largest export body (as sent, and decompressed), and
# how many exports are stored at once before the next is told to retry (429).
TURNSCOPE_OTLP_MAX_BODY_BYTES = int(
    os.environ.get("TURNSCOPE_OTLP_MAX_BODY_BYTES", 16 * 1024 * 1024))
TURNSCOPE_OTLP_CONCURRENCY = int(os.environ.get("TURNSCOPE_OTLP_CONCURRENCY", 4))

# How much one turn may hold: a response past either is refused whole (ingest, import: a 413 or
# a command error, nothing written) or cut there (a live or proxied stream ends interrupted).
TURNSCOPE_MAX_EVENTS_PER_TURN = int(os.environ.get("TURNSCOPE_MAX_EVENTS_PER_TURN", 20_000))
TURNSCOPE_MAX_CITATIONS_PER_TURN = int(os.environ.get("TURNSCOPE_MAX_CITATIONS_PER_TURN", 5_000))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # Credentials never reach the log, whatever a message interpolates.
    "filters": {"redact": {"()": "guards.redaction.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                             "filters": ["redact"]}},
    "loggers": {
        "turnscope": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        # The development servers' access logs (daphne's runserver, Django's): request paths
        # with their queries, redacted like every other line.
        "django.channels.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # httpx logs each request's URL at INFO, and a proxied Gemini URL may carry ?key=.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}
