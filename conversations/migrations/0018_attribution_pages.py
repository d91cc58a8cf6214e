"""An attribution keeps the pages of the document its passage is on (Anthropic's
``page_location``), so exports and the page can say "p. 3–4": before, they were in the replay
value only."""

import json

from django.db import migrations, models

BATCH = 2000


def backfill(apps, schema_editor):
    """The pages of the ``page_location`` citations already stored, read from their replay
    value as ingest reads them now (``providers.anthropic.blocks.page_span``)."""
    from providers.anthropic.blocks import CITATION, page_span

    Attribution = apps.get_model("conversations", "Attribution")
    rows = (Attribution.objects.using(schema_editor.connection.alias)
            .filter(replay__format=CITATION, replay__value__contains="page_location")
            .values_list("pk", "replay__value"))
    pending = []
    for pk, value in rows.iterator(chunk_size=BATCH):
        try:
            cite = json.loads(value)
        except ValueError:
            continue
        if isinstance(cite, dict) and cite.get("type") == "page_location":
            span = page_span(cite)
            if span is not None:
                pending.append(Attribution(pk=pk, page_first=span[0], page_last=span[1]))
    for start in range(0, len(pending), BATCH):
        Attribution.objects.using(schema_editor.connection.alias).bulk_update(
            pending[start:start + BATCH], ["page_first", "page_last"])


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0017_served_facets'),
    ]

    operations = [
        migrations.AddField(
            model_name='attribution',
            name='page_first',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='attribution',
            name='page_last',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name='attribution',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('page_first__isnull', True), ('page_last__isnull', True)), models.Q(('page_first__gte', 1), ('page_last__gte', models.F('page_first'))), _connector='OR'), name='attribution_pages_valid'),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
