"""``{% lean_result_list cl %}``: Django's ``result_list`` tag, with the rows from
``conversations.admin_list`` (same template, same per-model overrides)."""

from typing import Any

from django import template
from django.contrib.admin.templatetags.base import InclusionAdminNode

from conversations.admin_list import results

register = template.Library()


@register.tag(name="lean_result_list")
def lean_result_list(parser: Any, token: Any) -> InclusionAdminNode:
    return InclusionAdminNode(parser, token, func=results,
                              template_name="change_list_results.html", takes_context=False)
