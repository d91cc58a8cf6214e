"""The Sources pages' rows, derived from the event log as the store writes
(``conversations.source_index``), read by ``conversations.source_report``."""

from __future__ import annotations

from django.db import models

INTEGRITIES = ("exact", "repaired", "dropped", "no_source")  # how a citation was placed


class SourceUse(models.Model):
    """A source a turn consulted or cited: one row per (turn, source), the unit the Sources
    pages count by (``conversations.source_index`` keeps them as the store writes, and
    rebuilds them). Derived, like SearchDoc; deleted with its turn. ``key`` is the URL, or the
    title of a source that has none (a document); ``host`` is where it points (a Gemini
    grounding redirect: the site its title names) and ``site`` that host's registrable
    domain. ``provider``, ``model`` and ``created_at`` are the turn's, copied for the filters."""

    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE,
                                     related_name="+", db_index=False)
    turn = models.ForeignKey("conversations.Turn", on_delete=models.CASCADE, related_name="+",
                             db_index=False)  # the unique index leads with it
    provider = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    key = models.TextField()
    key_hash = models.CharField(max_length=64)
    title = models.TextField(blank=True)
    host = models.CharField(max_length=255, blank=True)
    site = models.CharField(max_length=255, blank=True)
    # Attributions of the turn naming it (each once), and how they were placed.
    cited = models.PositiveIntegerField(default=0)
    exact = models.PositiveIntegerField(default=0)
    repaired = models.PositiveIntegerField(default=0)
    dropped = models.PositiveIntegerField(default=0)
    no_source = models.PositiveIntegerField(default=0)
    # How many of the turn's hosted activities listed it among what they consulted.
    consulted = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "key_hash"], name="source_use_unique"),
        ]
        indexes = [
            # A conversation's rows of some domains: what the roll-up's cells held of it
            # before a write (``conversations.source_tally``), its delete, the list's search
            # as a filter.
            models.Index(fields=["conversation", "site"], name="source_use_conversation"),
            # A domain's and a URL's rows in time order: their citing turns, and a cell's
            # first and last seen again after rows left it. The tables read the roll-up
            # (``SourceTally``), so no covering index: each is one more B-tree a source
            # written costs.
            models.Index(fields=["site", "created_at"], name="source_use_site"),
            models.Index(fields=["key_hash", "created_at"], name="source_use_key"),
        ]

    def __str__(self) -> str:
        return f"{self.key} in turn {self.turn_id}"


class SearchUse(models.Model):
    """A web search a turn ran (one row per turn and search activity id), for the Sources
    pages' citation profiles: kept and rebuilt with ``SourceUse``, the turn's provider, model
    and time copied the same way."""

    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE,
                                     related_name="+", db_index=False)
    turn = models.ForeignKey("conversations.Turn", on_delete=models.CASCADE, related_name="+",
                             db_index=False)  # the unique index leads with it
    provider = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    activity_id = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "activity_id"], name="search_use_unique"),
        ]
        indexes = [
            models.Index(fields=["conversation"], name="search_use_conversation"),
        ]

    def __str__(self) -> str:
        return f"search {self.activity_id} in turn {self.turn_id}"


# SourceTally.group: what its name is; "a": a provider · model's answers (name "").
GROUPS = {"domain": "d", "host": "h", "url": "u", "answers": "a"}


class _CellColumns(models.Model):
    """The columns of a roll-up cell (``SourceTally``) and of a difference to one
    (``SourceTallyDelta``)."""

    owner = models.IntegerField()  # the conversation's owner's id; 0: nobody's
    group = models.CharField(max_length=1)
    name = models.CharField(max_length=255)
    day = models.DateField()
    provider = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)
    site = models.CharField(max_length=255, blank=True)  # the domain a host or URL is under
    host = models.CharField(max_length=255, blank=True)  # a URL's
    label = models.TextField(blank=True)  # a URL's key (its URL, or a document's title)
    title = models.TextField(blank=True)  # a URL's title (the greatest its rows give)
    # Of the SourceUse rows in the cell: attributions, rows consulted, consulted and not
    # cited, cited, cited and not consulted, and how the attributions were placed. Signed:
    # a change's difference goes in by one upsert, negative when rows leave the cell.
    cited = models.IntegerField(default=0)
    consulted = models.IntegerField(default=0)
    consulted_not_cited = models.IntegerField(default=0)
    cited_sources = models.IntegerField(default=0)
    cited_not_consulted = models.IntegerField(default=0)
    exact = models.IntegerField(default=0)
    repaired = models.IntegerField(default=0)
    dropped = models.IntegerField(default=0)
    no_source = models.IntegerField(default=0)
    turns = models.IntegerField(default=0)
    conversations = models.IntegerField(default=0)  # held in this cell alone
    # Answer cells ("a"): their turns are the agent turns, these their web searches and the
    # turns that searched.
    searches = models.IntegerField(default=0)
    searched = models.IntegerField(default=0)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        abstract = True


class SourceTally(_CellColumns):
    """A cell of the Sources roll-up: what the turns of one owner's conversations, on one UTC
    day, served by one provider · model, consulted and cited of one domain, host or URL
    (``group``; a URL is named by its key's hash, its key in ``label``), or answered (group
    "a": the citation profiles' answers and searches). Kept by
    ``conversations.source_tally`` from the ``SourceUse`` rows as the store writes them, so
    that the Sources tables sum a few cells instead of every row a user sees.

    Every count adds up across cells, but ``conversations``: a conversation counts in the one
    cell holding all its uses of the name; one whose uses spread over several cells (days,
    models) has a ``SourceSpread`` row per cell instead, and a table counts those distinct."""

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["group", "owner", "name", "day", "provider", "model"],
                name="source_tally_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.group} {self.name} on {self.day} ({self.provider} {self.model})"


class SourceSpread(models.Model):
    """A conversation whose uses of a domain, host or URL lie in more than one
    ``SourceTally`` cell: one row per such cell (see there)."""

    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE,
                                     related_name="+", db_index=False)
    owner = models.IntegerField()
    group = models.CharField(max_length=1)
    name = models.CharField(max_length=255)
    day = models.DateField()
    provider = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "group", "name", "day", "provider", "model"],
                name="source_spread_unique"),
        ]
        indexes = [models.Index(fields=["group", "owner", "name"], name="source_spread_name")]

    def __str__(self) -> str:
        return f"{self.group} {self.name} in conversation {self.conversation_id}"


class SourceTallyDelta(_CellColumns):
    """A difference to ``SourceTally`` cells written by a recording's transaction, to be added
    to them later (``conversations.source_tally.fold``, before any read of them): inserting
    here takes no lock another recording waits on, where adding to the cells, the same few
    rows for every recording of an owner's day and model, made each wait for the one before
    it to commit. A row per cell and transaction; ``left``: rows left the cell (its times
    and title read again when folded)."""

    left = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"difference to {self.group} {self.name} on {self.day}"
