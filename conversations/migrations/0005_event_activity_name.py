"""Event.activity_name: the hosted activity's name, derived from the body by the store, so the
conversation list counts searches by a column instead of a substring match on JSON text."""

from django.db import migrations, models

BATCH = 500


def derive(apps, schema_editor):
    from streams import bodies

    Event = apps.get_model("conversations", "Event")
    length = Event._meta.get_field("activity_name").max_length
    by_name: dict[str, list] = {}
    rows = Event.objects.filter(kind="hosted_activity").values_list("id", "body")
    for pk, body in rows.iterator(chunk_size=BATCH):
        name = bodies.load("hosted_activity", body).name[:length]
        if name:
            by_name.setdefault(name, []).append(pk)
    # The historical model's plain manager: a schema change, not a change to an event.
    for name, pks in by_name.items():
        for at in range(0, len(pks), BATCH):
            Event.objects.filter(pk__in=pks[at:at + BATCH]).update(activity_name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0004_uuid7_ids"),
    ]

    operations = [
        migrations.AddField(
            model_name="event",
            name="activity_name",
            field=models.CharField(blank=True, default="", max_length=100),
            preserve_default=False,
        ),
        migrations.RunPython(derive, migrations.RunPython.noop),
    ]
