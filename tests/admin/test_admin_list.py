"""The lean list rows (``conversations.admin_list``) are Django's own rows: for every list page,
filtered or not, in a popup or not, each row's HTML equals what ``items_for_result`` renders
with the change URL Django reverses."""

from __future__ import annotations

import datetime
import functools

import pytest
from django.contrib import admin
from django.contrib.admin.templatetags.admin_list import items_for_result
from django.contrib.admin.views.main import ChangeList
from django.db import models
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from conversations import admin_list, search
from conversations.admin_list import LeanChangeList, change_url, results, when
from conversations.models import Attribution, Conversation, Event, ProviderPayload, Turn
from tests.admin.test_admin import payload, populate

pytestmark = pytest.mark.django_db

ADMINS = [Conversation, Turn, Event, Attribution, ProviderPayload]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def awkward_rows() -> None:
    """Rows with what a cell must get right: markup and quotes to escape, empty values, a
    missing payload, a fork, booleans both ways, a whole-event attribution, a big payload."""
    base = populate(4)
    Conversation.objects.filter(pk=base.pk).update(title='<b>"fish" & chips</b> é')
    search.retitle(base.pk, '<b>"fish" & chips</b> é')  # as the store's rename keeps it
    fork = Conversation.objects.create(title="", forked_from=base, forked_at_turn=1)
    turn = Turn.objects.create(conversation=fork, index=0, role="user", status="failed",
                               end_reason="", provider="", model="")
    event = Event.objects.create(conversation=fork, turn=turn, seq=1, kind="message",
                                 text="<script>x</script>   \n  ", incomplete=True,
                                 activity_id="")
    Attribution.objects.create(event=event, ordinal=0, url="javascript:alert(1)", title="",
                               incomplete=True)
    payload({"text": "y" * 20_000}, provider="open<ai>", format="f&1", version="")


def page_changelist(admin_client, model, query: str = "") -> ChangeList:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist") + query
    response = admin_client.get(url)
    assert response.status_code == 200, url
    return response.context["cl"]


def djangos_rows(cl: ChangeList) -> list[str]:
    """The rows as Django renders them, with the URL reversed per row."""
    cl.url_for_result = functools.partial(ChangeList.url_for_result, cl)
    try:
        return ["".join(items_for_result(cl, obj, None)) for obj in cl.result_list]
    finally:
        del cl.url_for_result


# A filter per list that keeps rows (its query string is kept in each row's link).
FILTERED = {Conversation: "?q=fish", Turn: "?role__exact=agent", Event: "?kind=message",
            Attribution: "?incomplete__exact=1", ProviderPayload: "?provider=anthropic"}


@pytest.mark.parametrize("model", ADMINS)
@pytest.mark.parametrize("query", ["", "?o=-1", "filtered", "?_popup=1"])
def test_lean_rows_are_djangos_rows(admin_client, model, query):
    awkward_rows()
    cl = page_changelist(admin_client, model, FILTERED[model] if query == "filtered" else query)
    assert isinstance(cl, LeanChangeList)
    lean = [str(row[0]) for row in results(cl)["results"]]
    assert lean, "the page has rows"
    assert lean == djangos_rows(cl)
    if query == "filtered":
        assert "_changelist_filters=" in lean[0]


@pytest.mark.parametrize("model", ADMINS)
def test_the_page_shows_the_lean_rows(admin_client, model):
    awkward_rows()
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    response = admin_client.get(url)
    cl = response.context["cl"]
    html = response.content.decode()
    for row in djangos_rows(cl):
        assert f"<tr>{row}</tr>" in html
    assert "admin/conversations/lean_change_list.html" in [t.name for t in response.templates]


def test_markup_in_a_title_is_escaped_in_every_list(admin_client):
    awkward_rows()
    for model in (Conversation, Turn, Event):
        html = admin_client.get(reverse(
            f"admin:conversations_{model._meta.model_name}_changelist")).content.decode()
        assert "<b>&quot;fish&quot;" not in html and '<b>"fish"' not in html
        assert "&lt;b&gt;&quot;fish&quot; &amp; chips&lt;/b&gt; é" in html, model


def test_columns_django_renders_through_its_generic_path(admin_client, settings):
    """Column kinds this project's admins do not list still render as Django's: a model
    method, a callable, a lambda, a property, an integer with thousands separators, choices,
    an auto-created key, a dated method value, and list_display_links on a later column."""

    @admin.display(description="size+1")
    def bigger(obj):
        return obj.size + 1

    class Probe(admin_list.LeanListAdmin):
        list_display = ("id", "provider", "__str__", bigger, (lambda obj: obj.format),
                        "size", "sha256", "made", "created_at")
        list_display_links = ("provider", "size")

        @admin.display(description="made")
        def made(self, obj):
            return obj.created_at.date()

    payload({"a": 1}, provider="p<1>")
    payload({"b": 2}, provider="")
    site = admin.AdminSite(name="admin")
    probe = Probe(ProviderPayload, site)
    request = RequestFactory().get("/")
    request.user = type("Staff", (), {"is_active": True, "is_staff": True,
                                      "has_perm": lambda self, *a: True})()
    for separator in (False, True):
        settings.USE_THOUSAND_SEPARATOR = separator
        cl = probe.get_changelist_instance(request)
        cl.formset = None  # as changelist_view sets it for a list that is not editable
        lean = [str(row[0]) for row in results(cl)["results"]]
        assert lean == djangos_rows(cl), separator


def test_an_editable_list_keeps_djangos_renderer(admin_client):
    class Editable(admin_list.LeanListAdmin):
        list_display = ("id", "provider")
        list_editable = ("provider",)

    payload({"a": 1})
    probe = Editable(ProviderPayload, admin.AdminSite(name="admin"))
    request = RequestFactory().get("/")
    request.user = type("Staff", (), {"is_active": True, "is_staff": True,
                                      "has_perm": lambda self, *a: True})()
    cl = probe.get_changelist_instance(request)
    cl.formset = probe.get_changelist_formset(request)(queryset=cl.result_list)
    rows = results(cl)["results"]
    assert rows[0].form is not None  # Django's rows, each with its form


def test_change_url_is_reverse():
    conversation = Conversation.objects.create(title="x")
    assert change_url(Conversation, conversation.pk) == reverse(
        "admin:conversations_conversation_change", args=[conversation.pk])
    assert change_url(Attribution, 7) == reverse("admin:conversations_attribution_change",
                                                 args=[7])


def test_when_is_local_time_to_the_second(settings):
    instant = datetime.datetime(2026, 12, 1, 18, 45, 13, 999, tzinfo=datetime.UTC)
    assert when(instant) == "2026-12-01 18:45:13"
    with timezone.override("Europe/Paris"):
        assert when(instant) == "2026-12-01 19:45:13"
    assert when(None) == "—"


def test_a_timestamp_column_is_a_time_element_that_does_not_wrap():
    conversation = Conversation.objects.create(title="t")
    column = admin_list.timestamp("created_at")
    cell = column(None, conversation)
    assert cell == (f'<time class="nowrap" datetime="{conversation.created_at.isoformat()}">'
                    f"{when(conversation.created_at)}</time>")
    assert column.admin_order_field == "created_at" and column.short_description == "created at"


def test_field_fast_paths_match_display_for_field():
    """Each type ``_shower`` shortcuts, over the values that matter, against Django's own."""
    from django.contrib.admin.utils import display_for_field

    cases = [
        (models.CharField(max_length=5), ["", "x", None, "<a>", "0"]),
        (models.TextField(), ["", "long text", None]),
        (models.BooleanField(), [True, False, None]),
        (models.PositiveBigIntegerField(), [0, 7, 1234567, None]),
        (models.IntegerField(), [-5, 0]),
    ]
    for field, values in cases:
        show = admin_list._shower(field, None, "-", False)
        for value in values:
            assert str(show(value)) == str(display_for_field(value, field, "-")), (field,
                                                                                    value)
