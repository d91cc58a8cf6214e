"""Indexes for the admin's filtered lists in their order, and none that another index already
leads with."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

# The single-column indexes these fields had: each is the leading column of a composite index
# that serves the same lookups (dropped here by name, as the database reports them: SQLite would
# rebuild the whole table for an AlterField of db_index, and PostgreSQL has a second "_like"
# index on a CharField's).
DROPPED = [
    ("attribution", "event_id"),
    ("attribution", "domain"),
    ("conversation", "owner_id"),
    ("conversation", "updated_at"),
    ("providerpayload", "format"),
    ("providerpayload", "provider"),
    ("providerpayload", "version"),
]


def drop_single_column_indexes(apps, schema_editor):
    connection = schema_editor.connection
    for model_name, column in DROPPED:
        table = apps.get_model("conversations", model_name)._meta.db_table
        with connection.cursor() as cursor:
            constraints = connection.introspection.get_constraints(cursor, table)
        for name, info in constraints.items():
            if (
                info["index"]
                and not info["unique"]
                and not info["primary_key"]
                and info["columns"] == [column]
            ):
                schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def restore_single_column_indexes(apps, schema_editor):
    for model_name, column in DROPPED:
        table = apps.get_model("conversations", model_name)._meta.db_table
        name = schema_editor.quote_name(f"{table[:40]}_{column}_single")
        schema_editor.execute(
            f"CREATE INDEX {name} ON {schema_editor.quote_name(table)} "
            f"({schema_editor.quote_name(column)})"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0010_turnfragment_no_style_hashes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="attribution",
                    name="event",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="attributions",
                        to="conversations.event",
                    ),
                ),
                migrations.AlterField(
                    model_name="attribution",
                    name="domain",
                    field=models.CharField(blank=True, max_length=255),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="owner",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="conversations",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="updated_at",
                    field=models.DateTimeField(default=django.utils.timezone.now),
                ),
                migrations.AlterField(
                    model_name="providerpayload",
                    name="format",
                    field=models.CharField(max_length=100),
                ),
                migrations.AlterField(
                    model_name="providerpayload",
                    name="provider",
                    field=models.CharField(max_length=64),
                ),
                migrations.AlterField(
                    model_name="providerpayload",
                    name="version",
                    field=models.CharField(max_length=200),
                ),
            ],
            database_operations=[
                migrations.RunPython(drop_single_column_indexes, restore_single_column_indexes),
            ],
        ),
        migrations.RemoveIndex(model_name="attribution", name="attribution_event_ordinal"),
        migrations.AddIndex(
            model_name="attribution",
            index=models.Index(fields=["event", "ordinal", "id"], name="attribution_event_order"),
        ),
        migrations.AddIndex(
            model_name="attribution",
            index=models.Index(
                condition=models.Q(("incomplete", True)),
                fields=["event", "ordinal", "id"],
                name="attribution_incomplete",
            ),
        ),
        migrations.AddIndex(
            model_name="attribution",
            index=models.Index(
                fields=["domain", "event", "ordinal", "id"], name="attribution_domain_order"
            ),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(fields=["kind", "conversation", "seq"], name="event_kind_order"),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(
                condition=models.Q(("incomplete", True)),
                fields=["conversation", "seq"],
                name="event_incomplete",
            ),
        ),
        migrations.AddIndex(
            model_name="providerpayload",
            index=models.Index(fields=["provider", "created_at"], name="payload_provider_created"),
        ),
        migrations.AddIndex(
            model_name="providerpayload",
            index=models.Index(fields=["format", "created_at"], name="payload_format_created"),
        ),
        migrations.AddIndex(
            model_name="providerpayload",
            index=models.Index(fields=["version", "created_at"], name="payload_version_created"),
        ),
    ]
