import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0005_event_activity_name"),
        ("live", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="Heartbeat",
            fields=[
                ("turn", models.OneToOneField(
                    on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                    related_name="+", serialize=False, to="conversations.turn")),
                ("beat_at", models.DateTimeField()),
                ("host", models.CharField(blank=True, max_length=255)),
                ("pid", models.PositiveIntegerField(default=0)),
            ],
        ),
    ]
