"""Prepare a database for an end-to-end run; prints JSON: user session, conversations."""

import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.live.e2e_settings")
django.setup()

from django.contrib.auth import (  # noqa: E402
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,
)
from django.contrib.sessions.backends.db import SessionStore  # noqa: E402
from django.core.management import call_command  # noqa: E402

from conversations import store  # noqa: E402
from live import bundled  # noqa: E402

call_command("migrate", interactive=False, verbosity=0)
user, _ = get_user_model().objects.get_or_create(username="e2e")
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
samples = {s.slug: str(c.pk) for s, c, _ in bundled.load(user)}
watch = [str(store.create_conversation(title=f"watch {i}", owner=user).pk) for i in range(4)]
from rest_framework.authtoken.models import Token  # noqa: E402

token = Token.objects.get_or_create(user=user)[0].key  # for the recording proxy
print(json.dumps({"session": session.session_key, "samples": samples, "watch": watch,
                  "token": token}))
