"""Password guessing is rate-limited: failed logins per client address and username
(``TURNSCOPE_LOGIN_FAILURES``, e.g. ``"10/15min"``). Past the limit every attempt for that
pair is refused, the right password too, until the window ends; a success clears the count.

The limit lives in the authentication backends (``LoginRateLimit`` ahead of ``ModelBackend``,
failures counted from ``user_login_failed``), so the login page and the admin's login share it;
the login page answers a blocked attempt with a 429 that says so."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model, user_logged_in, user_login_failed
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from guards import ratelimit

SCOPE = "login"


def _rate() -> str:
    return str(getattr(settings, "TURNSCOPE_LOGIN_FAILURES", "10/15min"))


def _ident(request: HttpRequest | None, username: Any) -> str:
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    return f"{address}\n{str(username or '').casefold()}"


def blocked(request: HttpRequest | None, username: Any) -> bool:
    return ratelimit.exceeded(cache, SCOPE, _ident(request, username), _rate())


class LoginRateLimit(ModelBackend):
    """First in ``AUTHENTICATION_BACKENDS``: refuses (``PermissionDenied``: no backend after it
    is tried) a username whose failures from this address used up the rate; otherwise steps
    aside (``None``) for ``ModelBackend``, which checks the password. Sessions keep naming
    ``ModelBackend``, so nobody is logged out by this; a session naming this backend (a login
    without ``authenticate``, e.g. ``force_login``) reads its user as ``ModelBackend`` does."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None,
                     password: str | None = None, **kwargs: Any) -> Any:
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if blocked(request, username):
            raise PermissionDenied("too many failed logins")
        return None


def _failed(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None,
            **kwargs: Any) -> None:
    username = credentials.get("username", credentials.get(get_user_model().USERNAME_FIELD))
    ratelimit.count(cache, SCOPE, _ident(request, username), _rate())


def _succeeded(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    ratelimit.reset(cache, SCOPE, _ident(request, user.get_username()))


user_login_failed.connect(_failed, dispatch_uid="turnscope.auth.failed")
user_logged_in.connect(_succeeded, dispatch_uid="turnscope.auth.succeeded")


class LoginView(auth_views.LoginView):
    """Django's login page; a blocked attempt is a 429 with a message that says why."""

    def form_invalid(self, form: Any) -> HttpResponse:
        if blocked(self.request, form.data.get("username")):
            response = self.render_to_response(
                self.get_context_data(form=form, too_many_attempts=True), status=429)
            return response
        return super().form_invalid(form)
