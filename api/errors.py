"""The API's one exception handler (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``).

Every error body is ``{"detail": str, "errors"?: {…}}`` with credential-shaped text redacted
(messages may quote input). Domain errors become responses here, not in the views:

- ``ForkError`` names the fork point: a 400 on ``at_turn``.
- An endpoint that reads untrusted input (ingest, import) declares ``refusals``: how it words
  each way of refusing that input, always a 400 with nothing written. ``MalformedInput`` (the
  wire is not what it claims), ``InvalidDocument`` (not an export document), any other
  ``ValueError`` (``ProvenanceError``, ``UnregisteredValue``, an unknown provider: readable but
  refused), a database refusal (``IntegrityError``, ``DataError``) and an adapter or importer
  failing in an unforeseen way on the input (``KeyError``, ``TypeError``…, logged by place, never
  with the input).

Anywhere else those exceptions are bugs and stay 500s.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from typing import Any

from django.db import DataError, IntegrityError
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.views import exception_handler as drf_exception_handler

from api.http import PayloadTooLarge
from conversations.forking import ForkError
from conversations.schema import InvalidDocument
from guards.redaction import redact_text, redact_value
from streams.errors import MalformedInput, TurnTooLarge

log = logging.getLogger("turnscope.api")

UNSTORABLE = (IntegrityError, DataError)
# What an adapter or importer raises when untrusted input has a shape it did not foresee.
UNEXPECTED = (KeyError, TypeError, AttributeError, IndexError, RecursionError)


@dataclass(frozen=True)
class Refusals:
    """How an endpoint words its refusals of untrusted input. Each template is formatted with
    ``reason`` (the error's message; a database error's first line; an unexpected error's type
    name) and the names the view's ``refusal_names()`` gives (e.g. ``provider``). ``action``
    names what failed in the log line of an unexpected error."""

    action: str
    refused: str  # any ValueError the more specific templates do not word
    unstorable: str
    unexpected: str
    unreadable: str | None = None  # MalformedInput
    invalid: str | None = None  # InvalidDocument


def exception_handler(exc: Exception, context: dict[str, Any]) -> Any:
    view = context.get("view")
    exc = _domain_error(exc, view) or exc
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(data, dict) and set(data) == {"detail"}:
        body: dict[str, Any] = {"detail": str(data["detail"])}
    elif isinstance(data, dict):
        body = {"detail": _flatten(data), "errors": redact_value(data)}
    else:
        body = {"detail": _flatten(data)}
    body["detail"] = redact_text(body["detail"])[:2000]
    response.data = body
    return response


def _domain_error(exc: Exception, view: Any) -> APIException | None:
    if isinstance(exc, ForkError):
        return ValidationError({"at_turn": str(exc)})
    refusals: Refusals | None = getattr(view, "refusals", None)
    if refusals is None:
        return None
    if isinstance(exc, TurnTooLarge):  # readable, but more than a turn may hold
        return PayloadTooLarge(f"The turn cannot be stored: {exc}.")
    if isinstance(exc, MalformedInput) and refusals.unreadable:
        template, reason = refusals.unreadable, str(exc)
    elif isinstance(exc, InvalidDocument) and refusals.invalid:
        template, reason = refusals.invalid, str(exc)
    elif isinstance(exc, ValueError):
        template, reason = refusals.refused, str(exc)
    elif isinstance(exc, UNSTORABLE):
        template, reason = refusals.unstorable, _first_line(exc)
    elif isinstance(exc, UNEXPECTED):
        names = view.refusal_names()
        _log_unexpected(refusals.action.format(**names), exc)
        template, reason = refusals.unexpected, type(exc).__name__
    else:
        return None
    return ParseError(template.format(reason=reason, **view.refusal_names()))


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _log_unexpected(action: str, exc: BaseException) -> None:
    """Log where it failed, never the input (the message of a KeyError or TypeError may quote
    it)."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f"{frame.filename}:{frame.lineno} in {frame.name}" if frame else "?"
    log.warning("%s: unexpected %s at %s", action, type(exc).__name__, where)


def _flatten(data: Any) -> str:
    if isinstance(data, dict):
        return "; ".join(f"{k}: {_flatten(v)}" for k, v in data.items())
    if isinstance(data, list):
        return "; ".join(_flatten(v) for v in data)
    return str(data)
