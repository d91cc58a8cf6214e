"""Links of the Sources pages: the same page, or another, with the current filters and one or
more parameters changed."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import template

register = template.Library()


@register.simple_tag(takes_context=True)
def with_params(context: Any, **changes: Any) -> str:
    """``?`` and the request's parameters with ``changes`` (an empty value removes one);
    the page number is dropped unless given."""
    params = {k: v for k, v in context["request"].GET.items() if k != "page"}
    for key, value in changes.items():
        if value in ("", None):
            params.pop(key, None)
        else:
            params[key] = str(value)
    return "?" + urlencode(params)


@register.simple_tag(takes_context=True)
def filtered(context: Any, **more: Any) -> str:
    """``?`` and the Sources filters only (no table state), with ``more``."""
    params = {**context["filter_params"], **{k: str(v) for k, v in more.items() if v}}
    return "?" + urlencode(params)


@register.filter
def share(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.0f} %"


@register.filter
def ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"
