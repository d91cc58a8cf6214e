"""Names and SQL pieces every part of the list's indexes shares (``conversations.search``):
the facet kinds, the FTS tables, how a pattern is matched on each database."""

from __future__ import annotations

import re
from typing import Any

from conversations.models import Attribution, ConversationFacet, SearchDoc
from streams.bodies import ActivityBody

DOMAIN, SITE, PROVIDER, MODEL = "domain", "site", "provider", "model"
# (provider, model) of the turns (agent turns: only they have one), one facet per pair in the
# order the turns first used it (facet ids are in insertion order): a list row's provenance
# chips, read in a query bounded by the pairs, not by the turns (the 5,000-turn
# conversation's 2,500 agent turns were 9 ms of staff's list page 1).
SERVED = "served"
_PAIR = "\t"  # between provider and model in a served facet (a provider is our own name)
SEARCH_ACTIVITY = "web_search"  # the hosted activity a list row counts as a search
COUNTED = (DOMAIN, PROVIDER, MODEL)  # the kinds the filter choices list
_VALUE_LENGTH = ConversationFacet._meta.get_field("value").max_length
FTS_TABLE = "conversations_searchdoc_fts"
SOURCE_FTS_TABLE = "conversations_attribution_fts"  # the admin's search of sources (0012)
# SQLite: an FTS rowid is the conversation's search key shifted by this, or'ed with the doc id
# (doc ids stay under 2^32: the insert trigger refuses one that does not).
KEY_SHIFT = 32
SEARCH_KEY_INDEX = "conversation_search_key"  # unique: one conversation per key


def sites(domain: str) -> list[str]:
    """The host and each parent domain of at least two labels: what a cited-domain filter for
    any of them matches. An IP address is only itself."""
    if not domain:
        return []
    if ":" in domain or domain.replace(".", "").isdigit():
        return [domain]
    labels = domain.split(".")
    return [".".join(labels[i:]) for i in range(max(len(labels) - 1, 1))]


def served_value(provider: str, model: str) -> str:
    """A served facet's value: the pair, cut to the column (as ``rebuild``'s SUBSTR cuts it)."""
    return f"{provider}{_PAIR}{model}"[:_VALUE_LENGTH]


def source_text(title: str, url: str) -> str:
    """The searchable text of a cited source."""
    return f"{title}\n{url}"


def owner_key(owner_id: int | None) -> int:
    """``FacetCount.owner_key``: the owner's id, 0 for a conversation without one."""
    return owner_id or 0


def _is_search(connection: Any) -> str:
    """SQL: the event aliased ``e`` is a search a list row counts (by its activity id)."""
    q = connection.ops.quote_name
    return (f"e.{q('kind')} = '{ActivityBody.kind}' AND "
            f"e.{q('activity_name')} = '{SEARCH_ACTIVITY}'")


MIN_QUERY = 3  # characters: a trigram

# PostgreSQL: the columns searched, each with a lower-cased copy that the database keeps (a
# generated column) and a trigram index of that copy. A trigram match is rechecked row by row,
# and ILIKE lower-cases each candidate's text again for that: 80 ms of a search for
# "disclosure" at 100k conversations (6,250 docs), 27 ms with LIKE on the folded copy.
FOLDED = {SearchDoc: ("body",), Attribution: ("url", "title")}


def folded(column: str) -> str:
    """The name of ``column``'s lower-cased copy (PostgreSQL, ``FOLDED``)."""
    return f"{column}_folded"


def _folded_index(model: type[Any], column: str) -> str:
    return f"{model._meta.model_name}_{column}_folded_trgm"


def _phrase(query: str) -> str:
    """``query`` as one FTS5 phrase: with the trigram tokenizer, the substring itself."""
    return '"' + query.replace('"', '""') + '"'


def _like(query: str) -> str:
    return "%" + re.sub(r"([\\%_])", r"\\\1", query) + "%"


def _contains(connection: Any, column: str, of: str = "") -> str:
    """SQL: ``column`` (of ``of``, a table's alias or quoted name) holds the ``_like`` pattern
    given as the one parameter, case-insensitively. PostgreSQL reads the column's folded copy
    (see ``FOLDED``) and folds the pattern with the same ``lower``: what ``ILIKE`` finds."""
    q = connection.ops.quote_name
    prefix = f"{of}." if of else ""
    if connection.vendor == "postgresql":
        return f"{prefix}{q(folded(column))} LIKE lower(%s) ESCAPE '\\'"
    return f"{prefix}{q(column)} LIKE %s ESCAPE '\\'"
