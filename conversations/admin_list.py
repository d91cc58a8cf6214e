"""The admin's list pages, lean: a changelist is 100 rows of up to ten cells, and Django's
generic cell code (``admin_list.items_for_result``: a field lookup that raises for every
method column, a ``reverse`` and a preserved-filters ``resolve`` per row, a form widget
template per checkbox) is most of such a page's time.

Here each ``list_display`` column is worked out once per page — what it reads, how it is
shown, its class, whether it links to the row's page — and each cell is then one call and one
string. The markup is Django's own (``tests/admin`` compares the two renderers' rows for every
list page), and Django's renderer still serves what this one does not take on: editable lists.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable
from html import escape
from typing import Any
from urllib.parse import quote as url_quote

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.templatetags.admin_list import (
    ResultList,
    _boolean_icon,
    result_headers,
    result_list,
)
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import display_for_field, display_for_value, quote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

_MARK = "__pk__"  # stands for the row's key in a change URL reversed once per page
_PATH_SAFE = "!$&'()*+,;=/~:@"  # what reverse() leaves unquoted in a path argument


def when(value: datetime.datetime | None) -> str:
    """A timestamp cell: local time to the second, one unambiguous string (Django's localized
    format costs more than the rest of a row, and shows minutes only)."""
    if value is None:
        return "—"
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def timestamp(field_name: str, description: str | None = None) -> Callable[[Any, Any], str]:
    """A list column showing ``field_name`` through ``when``, sortable by that field."""

    @admin.display(description=description or field_name.replace("_", " "),
                   ordering=field_name)
    def column(model_admin: Any, obj: Any) -> str:
        value = getattr(obj, field_name)
        if value is None:
            return when(value)
        # A <time> that does not wrap (a field's cell would be "nowrap"), with its instant.
        return SafeString(f'<time class="nowrap" datetime="{value.isoformat()}">{when(value)}'
                          "</time>")

    column.__name__ = f"{field_name}_when"
    return column


class LeanChangeList(ChangeList):
    """Reverses the change page's URL once per page, not once per row, and annotates the
    page's rows (only them) with the admin's ``list_annotations``."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # A paginator may read its pages from a reordered queryset (``rows``: the same rows in
        # the same order, read another way); Django reads a list of one page, or "show all",
        # from the changelist's queryset itself.
        rows = getattr(self.paginator, "rows", self.queryset)
        if rows is not self.queryset and not self.result_list.query.is_sliced:
            self.result_list = rows._clone()
        extra = getattr(self.model_admin, "list_annotations", None)
        if extra and isinstance(self.result_list, QuerySet) and not self.list_editable:
            self.result_list = self._annotated(self.result_list, extra)

    def _annotated(self, page: QuerySet, extra: dict[str, Any]) -> list[Any]:
        """The page's rows with what they show of other rows: the page's keys in the list's
        order first, then those rows with the annotations' joins. One query would join
        before it sorts, where the order is a sort (a search's matches), so once per match,
        not per row shown: 3,125 events read to show 100 sources."""
        keys = list(page.values_list("pk", flat=True))
        rows = self.apply_select_related(self.root_queryset).filter(pk__in=keys).order_by()
        by_key = {row.pk: row for row in rows.annotate(**extra)}
        return [by_key[key] for key in keys if key in by_key]

    @property
    def change_url(self) -> str:
        """The change page's URL with ``_MARK`` for the key (NoReverseMatch: none)."""
        return change_pattern(self.model, self.model_admin.admin_site.name)

    def url_for_result(self, result: Any) -> str:
        return self.change_url.replace(_MARK, path_key(getattr(result, self.pk_attname)), 1)


def path_key(pk: Any) -> str:
    """``pk`` as reverse() puts an admin key in a path."""
    return url_quote(str(quote(pk)), safe=_PATH_SAFE)


def change_url(model: type[models.Model], pk: Any) -> str:
    """reverse("admin:<app>_<model>_change", args=[pk]) for a link in a list cell."""
    return change_pattern(model).replace(_MARK, path_key(pk), 1)


def change_pattern(model: type[models.Model], current_app: str | None = None) -> str:
    """The model's admin change URL with ``_MARK`` for the key, reversed once per model, URL
    configuration and admin site (not once per row)."""
    opts = model._meta
    return _change_pattern(f"admin:{opts.app_label}_{opts.model_name}_change",
                           get_script_prefix(), get_urlconf(), current_app)


@functools.lru_cache(maxsize=64)
def _change_pattern(viewname: str, prefix: str, urlconf: Any, current_app: str | None) -> str:
    return reverse(viewname, args=(_MARK,), urlconf=urlconf, current_app=current_app)


class LeanListAdmin(admin.ModelAdmin):
    """A model admin whose list page's rows are rendered here (``results``)."""

    change_list_template = "admin/conversations/lean_change_list.html"
    # What a list row shows of other rows (a title, a seq), read with the page's 100 rows in
    # one query rather than as related objects, and kept out of the list's count.
    list_annotations: dict[str, Any] = {}

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return LeanChangeList

    def action_checkbox(self, obj: Any) -> str:
        # What Django's CheckboxInput renders, without a widget template per row.
        label = f"Select this object for an action - {escape(str(obj))}"
        return SafeString(f'<input type="checkbox" name="{ACTION_CHECKBOX_NAME}" '
                          f'value="{escape(str(obj.pk))}" class="action-select" '
                          f'aria-label="{label}">')


# -- the rows ------------------------------------------------------------------------------------

Cell = Callable[[Any], str]  # a row's object -> the cell's HTML, escaped


def results(cl: ChangeList) -> dict[str, Any]:
    """The context of ``change_list_results.html``, as Django's ``result_list`` makes it."""
    if cl.formset or not isinstance(cl, LeanChangeList):
        return result_list(cl)  # editable rows: Django's renderer, forms and all
    headers = list(result_headers(cl))
    cells = _columns(cl)
    return {
        "cl": cl,
        "result_hidden_fields": [],  # only editable lists have hidden fields
        "result_headers": headers,
        "num_sorted_fields": sum(1 for h in headers if h["sortable"] and h["sorted"]),
        # A row is one string of its cells: the template's loop then runs per row, not per
        # cell (the markup is the same).
        "results": [ResultList(None, [SafeString("".join([cell(obj) for cell in cells]))])
                    for obj in cl.result_list],
    }


def _columns(cl: ChangeList) -> list[Cell]:
    """One cell function per ``list_display`` column, as ``items_for_result`` would render
    that column's cells."""
    model_admin = cl.model_admin
    empty = model_admin.get_empty_value_display()
    link = _Link(cl)
    cells: list[Cell] = []
    first = True
    for index, name in enumerate(cl.list_display):
        linked = _links(cl, first, name) and link.url is not None
        value, field, attr = _reader(cl, name)
        column_empty = getattr(attr, "empty_value_display", empty)
        if name == "action_checkbox":
            classes = "action-checkbox"
        else:
            classes = "field-" + _field_class(name, index)
        if isinstance(field, models.DateField | models.TimeField | models.ForeignKey):
            classes += " nowrap"
        show = _shower(field, attr, column_empty, linked)
        tag = "td"
        if linked:
            tag = "th" if first else "td"
            first = False
        plain = field is None or field.auto_created  # shown as a value, not as a field
        # A related row that is gone shows the list's empty value (not the column's), as
        # items_for_result shows it.
        cells.append(_cell(value, show, empty, classes, tag, link if linked else None, plain))
    return cells


def _links(cl: ChangeList, first: bool, name: str) -> bool:
    if cl.list_display_links is None:
        return False
    if first and not cl.list_display_links:
        return True
    return name in cl.list_display_links


def _field_class(name: Any, index: int) -> str:
    if callable(name):
        return f"lambda{index}" if name.__name__ == "<lambda>" else name.__name__
    return str(name)


def _reader(cl: ChangeList, name: Any) -> tuple[Callable[[Any], Any], Any, Any]:
    """(object -> value, the model field or None, the attribute with the display options)."""
    model_admin, opts = cl.model_admin, cl.lookup_opts
    field = None
    if not callable(name):
        try:
            field = opts.get_field(name)
        except FieldDoesNotExist:
            field = None
        if field is not None and (
            (field.is_relation and ((field.many_to_one and not field.related_model)
                                    or field.one_to_many))
            or (field.is_relation and not field.many_to_many
                and getattr(field, "attname", None) == name)
        ):
            field = None  # what lookup_field treats as a plain attribute
    if field is not None:
        return (lambda obj: getattr(obj, name)), field, None  # a ForeignKey: its object
    if callable(name):
        return name, None, name
    if hasattr(model_admin, name) and name != "__str__":
        method = getattr(model_admin, name)
        return method, None, method
    attr = getattr(cl.model, name, None)

    def attribute(obj: Any) -> Any:
        value = getattr(obj, name)
        return value() if callable(value) else value

    return attribute, None, attr


def _shower(field: Any, attr: Any, empty: str, linked: bool) -> Callable[[Any], Any]:
    """value -> what the cell shows (escaped later), as ``items_for_result`` decides it."""
    if field is None or field.auto_created:
        boolean = getattr(attr, "boolean", False)
        if isinstance(attr, property) and hasattr(attr, "fget"):
            boolean = getattr(attr.fget, "boolean", False)
        if boolean:
            # An icon per value, made once per page (each is a static() lookup).
            icons = {value: _boolean_icon(value) for value in (True, False, None)}
            return lambda value: (icons[value] if value is True or value is False or value is None
                                  else _boolean_icon(value))
        grouped = settings.USE_THOUSAND_SEPARATOR

        def plain_value(value: Any) -> Any:
            # What display_for_value gives for the two types a method column returns most
            # (its checks and a number's locale lookups were a fifth of an admin list page).
            kind = type(value)
            if kind is str or kind is SafeString:
                return empty if value == "" else value
            if kind is int and not grouped:
                return str(value)
            return display_for_value(value, empty)

        return plain_value
    if isinstance(field.remote_field, models.ManyToOneRel):
        return lambda value: empty if value is None else value
    # What display_for_field gives, for the types that fill these lists, without its chain of
    # checks per cell (the renderers' comparison in tests/admin covers each).
    if not getattr(field, "flatchoices", None):
        kind = type(field)
        if kind in (models.CharField, models.TextField, models.SlugField):
            return lambda value: empty if value is None or value == "" else str(value)
        if kind in (models.BooleanField,):
            icons = {value: _boolean_icon(value) for value in (True, False, None)}
            return icons.__getitem__
        if issubclass(kind, models.IntegerField) and not settings.USE_THOUSAND_SEPARATOR:
            return lambda value: empty if value is None else str(value)
    return lambda value: display_for_field(value, field, empty, avoid_link=linked)


class _Link:
    """The row's change page, with the list's filters kept, from one reversed URL."""

    def __init__(self, cl: ChangeList) -> None:
        self.attname = str(cl.to_field) if cl.to_field else cl.lookup_opts.pk.attname
        self.pk_attname = cl.pk_attname
        self.popup = cl.is_popup
        try:
            url = cl.change_url  # type: ignore[attr-defined]
        except NoReverseMatch:
            self.url = None
            return
        self.url = add_preserved_filters(
            {"preserved_filters": cl.preserved_filters, "opts": cl.opts}, url)

    def wrap(self, obj: Any, text: Any) -> str:
        assert self.url is not None
        href = self.url.replace(_MARK, path_key(getattr(obj, self.pk_attname)), 1)
        opener = ""
        if self.popup:
            opener = format_html(' data-popup-opener="{}"', obj.serializable_value(self.attname))
        return format_html('<a href="{}"{}>{}</a>', href, opener, text)


def _cell(value: Callable[[Any], Any], show: Callable[[Any], Any], empty: str, classes: str,
          tag: str, link: _Link | None, plain: bool) -> Cell:
    opening = f'<{tag} class="{classes}">'
    closing = f"</{tag}>"
    nowrap = opening.replace('">', ' nowrap">', 1)
    dated = plain and "nowrap" not in classes

    def cell(obj: Any) -> str:
        try:
            raw = value(obj)
        except ObjectDoesNotExist:
            shown: Any = empty
            raw = None
        else:
            if isinstance(raw, str) and raw.strip() == "":
                raw = ""
            shown = show(raw)
        # conditional_escape, without its lazy-string wrapper per call (the same escaping).
        html = SafeString(shown.__html__() if hasattr(shown, "__html__")
                          else escape(str(shown)))
        if link is not None:
            html = link.wrap(obj, html)
        # A method column's date or time does not wrap either (a field's is known up front).
        start = nowrap if dated and isinstance(raw, datetime.date | datetime.time) else opening
        return SafeString(f"{start}{html}{closing}")

    return cell

