"""The Sources pages' rows (``SourceUse``, one per turn and source; ``SearchUse``, one per turn
and web search; kept by the store as it writes: ``conversations.source_index``), made for what
is stored already. New tables: no table is remade, no trigger lost."""

import django.db.models.deletion
from django.db import migrations, models


def fill(apps, schema_editor):
    from conversations import source_index

    # The roll-up's tables come in 0029, which fills them.
    source_index.rebuild(schema_editor.connection.alias, tally=False)


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0023_attribution_text_search_triggers'),
    ]

    operations = [
        migrations.CreateModel(
            name='SearchUse',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('provider', models.CharField(blank=True, max_length=64)),
                ('model', models.CharField(blank=True, max_length=200)),
                ('created_at', models.DateTimeField()),
                ('activity_id', models.CharField(max_length=200)),
                ('conversation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.conversation')),
                ('turn', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.turn')),
            ],
            options={
                'indexes': [models.Index(fields=['conversation'], name='search_use_conversation'), models.Index(fields=['provider', 'model', 'created_at'], name='search_use_served')],
                'constraints': [models.UniqueConstraint(fields=('turn', 'activity_id'), name='search_use_unique')],
            },
        ),
        migrations.CreateModel(
            name='SourceUse',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('provider', models.CharField(blank=True, max_length=64)),
                ('model', models.CharField(blank=True, max_length=200)),
                ('created_at', models.DateTimeField()),
                ('key', models.TextField()),
                ('key_hash', models.CharField(max_length=64)),
                ('title', models.TextField(blank=True)),
                ('host', models.CharField(blank=True, max_length=255)),
                ('site', models.CharField(blank=True, max_length=255)),
                ('cited', models.PositiveIntegerField(default=0)),
                ('exact', models.PositiveIntegerField(default=0)),
                ('repaired', models.PositiveIntegerField(default=0)),
                ('dropped', models.PositiveIntegerField(default=0)),
                ('no_source', models.PositiveIntegerField(default=0)),
                ('consulted', models.PositiveIntegerField(default=0)),
                ('conversation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.conversation')),
                ('turn', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.turn')),
            ],
            options={
                'indexes': [models.Index(fields=['conversation'], name='source_use_conversation'), models.Index(fields=['created_at'], name='source_use_created'), models.Index(fields=['provider', 'model', 'created_at'], name='source_use_served'), models.Index(fields=['site', 'created_at'], name='source_use_site'), models.Index(fields=['key_hash', 'created_at'], name='source_use_key')],
                'constraints': [models.UniqueConstraint(fields=('turn', 'key_hash'), name='source_use_unique')],
            },
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
