"""Password guessing is rate-limited: failed logins per client address and username
(``TURNSCOPE_LOGIN_FAILURES``, e.g. ``"10/15min"``). Past the limit every attempt for that
pair is refused, the right password too, until the window ends; a success clears the count.

The limit lives in the authentication backend, so the login page and the admin's login share
it; the login page answers a blocked attempt with a 429 that says so."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from conversations import ratelimit

SCOPE = "login"


def _rate() -> str:
    return str(getattr(settings, "TURNSCOPE_LOGIN_FAILURES", "10/15min"))


def _ident(request: HttpRequest | None, username: Any) -> str:
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    return f"{address}\n{str(username or '').casefold()}"


def blocked(request: HttpRequest | None, username: Any) -> bool:
    return ratelimit.exceeded(SCOPE, _ident(request, username), _rate())


class RateLimitedModelBackend(ModelBackend):
    def authenticate(self, request: HttpRequest | None, username: str | None = None,
                     password: str | None = None, **kwargs: Any) -> Any:
        if username is None:
            username = kwargs.get(self._username_field())
        ident = _ident(request, username)
        if ratelimit.exceeded(SCOPE, ident, _rate()):
            raise PermissionDenied("too many failed logins")  # no backend tries further
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            ratelimit.count(SCOPE, ident, _rate())
        else:
            ratelimit.reset(SCOPE, ident)
        return user

    @staticmethod
    def _username_field() -> str:
        from django.contrib.auth import get_user_model

        return str(get_user_model().USERNAME_FIELD)


class LoginView(auth_views.LoginView):
    """Django's login page; a blocked attempt is a 429 with a message that says why."""

    def form_invalid(self, form: Any) -> HttpResponse:
        if blocked(self.request, form.data.get("username")):
            response = self.render_to_response(
                self.get_context_data(form=form, too_many_attempts=True), status=429)
            return response
        return super().form_invalid(form)
