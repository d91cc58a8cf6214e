import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("conversations", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="Recording",
            fields=[
                ("id", models.BigAutoField(
                    auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("provider", models.CharField(max_length=64)),
                ("responses", models.TextField()),
                ("sample", models.CharField(blank=True, db_index=True, max_length=64)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("turn", models.OneToOneField(
                    on_delete=django.db.models.deletion.CASCADE, related_name="recording",
                    to="conversations.turn")),
            ],
        ),
    ]
