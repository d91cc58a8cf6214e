"""StreamingTail: a streaming turn's tail kept in the database while the cache is down."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0005_event_activity_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="StreamingTail",
            fields=[
                ("turn", models.OneToOneField(
                    on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                    related_name="+", serialize=False, to="conversations.turn")),
                ("tail", models.JSONField()),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
    ]
