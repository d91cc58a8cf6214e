"""The Sources roll-up (SourceTally, SourceSpread), filled from the SourceUse rows; the rows'
covering index gives way to (site, created_at) and (conversation, site)."""

import django.db.models.deletion
from django.db import migrations, models


def fill(apps, schema_editor):
    """The roll-up from the rows already kept (the Sources tables read it from now on)."""
    from conversations import source_tally

    source_tally.rebuild(schema_editor.connection.alias, journal=False)


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0028_ingested_turn_source'),
    ]

    operations = [
        migrations.CreateModel(
            name='SourceSpread',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('owner', models.IntegerField()),
                ('group', models.CharField(max_length=1)),
                ('name', models.CharField(max_length=255)),
                ('day', models.DateField()),
                ('provider', models.CharField(blank=True, max_length=64)),
                ('model', models.CharField(blank=True, max_length=200)),
            ],
        ),
        migrations.CreateModel(
            name='SourceTally',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('owner', models.IntegerField()),
                ('group', models.CharField(max_length=1)),
                ('name', models.CharField(max_length=255)),
                ('day', models.DateField()),
                ('provider', models.CharField(blank=True, max_length=64)),
                ('model', models.CharField(blank=True, max_length=200)),
                ('site', models.CharField(blank=True, max_length=255)),
                ('host', models.CharField(blank=True, max_length=255)),
                ('label', models.TextField(blank=True)),
                ('title', models.TextField(blank=True)),
                ('cited', models.IntegerField(default=0)),
                ('consulted', models.IntegerField(default=0)),
                ('consulted_not_cited', models.IntegerField(default=0)),
                ('cited_sources', models.IntegerField(default=0)),
                ('cited_not_consulted', models.IntegerField(default=0)),
                ('exact', models.IntegerField(default=0)),
                ('repaired', models.IntegerField(default=0)),
                ('dropped', models.IntegerField(default=0)),
                ('no_source', models.IntegerField(default=0)),
                ('turns', models.IntegerField(default=0)),
                ('conversations', models.IntegerField(default=0)),
                ('searches', models.IntegerField(default=0)),
                ('searched', models.IntegerField(default=0)),
                ('first_seen', models.DateTimeField()),
                ('last_seen', models.DateTimeField()),
            ],
        ),
        migrations.RemoveIndex(
            model_name='sourceuse',
            name='source_use_conversation',
        ),
        migrations.RemoveIndex(
            model_name='sourceuse',
            name='source_use_covering',
        ),
        migrations.AddIndex(
            model_name='sourceuse',
            index=models.Index(fields=['conversation', 'site'], name='source_use_conversation'),
        ),
        migrations.AddIndex(
            model_name='sourceuse',
            index=models.Index(fields=['site', 'created_at'], name='source_use_site'),
        ),
        migrations.AddField(
            model_name='sourcespread',
            name='conversation',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.conversation'),
        ),
        migrations.AddConstraint(
            model_name='sourcetally',
            constraint=models.UniqueConstraint(fields=('group', 'owner', 'name', 'day', 'provider', 'model'), name='source_tally_unique'),
        ),
        migrations.AddIndex(
            model_name='sourcespread',
            index=models.Index(fields=['group', 'owner', 'name'], name='source_spread_name'),
        ),
        migrations.AddConstraint(
            model_name='sourcespread',
            constraint=models.UniqueConstraint(fields=('conversation', 'group', 'name', 'day', 'provider', 'model'), name='source_spread_unique'),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
