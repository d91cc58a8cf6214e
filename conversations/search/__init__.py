"""The conversation list's indexes: text search, facets (cited domains, providers, models) and
the filter choices, kept in step with the event log by its one writer (``conversations.store``).

Three tables, all derived (``rebuild`` recomputes them from the log; a test checks that what the
writes left equals a rebuild):

- ``SearchDoc``: one row per searchable text of a conversation — its title, each message's
  text, each cited source's title and URL. **Substring semantics** (what ``icontains`` gave
  before, and what people expect of a search box that finds "news.example" or half a word), so
  both databases index trigrams rather than words: PostgreSQL a GIN ``gin_trgm_ops`` index on
  ``body_folded``, a lower-cased copy of ``body`` it keeps (queried with ``LIKE lower('%q%')``,
  which that index serves: ``FOLDED``), SQLite an FTS5 table with the
  ``trigram`` tokenizer over the same rows (queried with a phrase ``MATCH``). ``tsvector`` was
  not chosen: it matches stemmed words, so "news.example", "xample" or a URL fragment would no
  longer be found, and the two databases would disagree. Queries under three characters have no
  trigram: they look at conversation titles only (``filtered``), never at every message.
  The FTS5 table is a *contentless* index of ``SearchDoc`` whose rowids name the doc's
  conversation: ``search_key << 32 | doc id``, where ``Conversation.search_key`` is a small
  integer the writer gives each conversation on SQLite. A search's match set is then read from
  the FTS index alone (``rowid >> 32``), and the list's order indexes end with the key, so
  walking the list in order tests each conversation from the index: no doc row, no
  conversation row is read until the page's own rows. (Through doc ids, mapping each matching
  doc to its conversation and testing UUIDs was most of a common word's search: 21 -> 9 ms
  for "officials" at 100k conversations, interleaved, raw SQLite.) SQLite keeps the FTS table
  in step with two triggers on ``SearchDoc`` (insert, delete), the SQLite way of declaring an
  index on another table: the writer writes ``SearchDoc`` rows and nothing else, as it does on
  PostgreSQL, where the GIN index follows the table by itself (and the key stays NULL).
- ``ConversationFacet``: (conversation, kind, value) — each cited host (``domain``), each host
  *and its parent domains* of two labels or more (``site``: what the cited-domain filter matches,
  "example.fr" finds "meteo.example.fr"), each provider and model of its turns. A filter is one
  indexed ``IN (SELECT conversation_id ...)``, never a subquery per conversation.
- ``FacetCount``: per owner, kind and value, how many conversations have it — the filter
  choices, read without aggregating the store. Incremented when a facet row is new, decremented
  when a conversation is deleted, moved when an owner changes.

And a list row's counts, columns of the conversation (``turn_count``, ``citation_count``,
``search_count``: distinct web_search activity ids), added to by each write (``_count``), so
a row costs the same whatever its conversation's size.
"""

from conversations.search.common import (
    COUNTED,
    DOMAIN,
    FOLDED,
    FTS_TABLE,
    KEY_SHIFT,
    MIN_QUERY,
    MODEL,
    PROVIDER,
    SEARCH_ACTIVITY,
    SEARCH_KEY_INDEX,
    SERVED,
    SITE,
    SOURCE_FTS_TABLE,
    folded,
    owner_key,
    served_value,
    sites,
    source_text,
)
from conversations.search.index import (
    Pending,
    forget,
    insert_indexed,
    insert_rows,
    inserts_gathered,
    move_counts,
    retitle,
    write,
)
from conversations.search.queries import (
    any_match,
    choices,
    counted_matches,
    filtered,
    matching,
    provenance_chips,
    source_folded_matches,
    source_matches,
    text_matches,
    with_facet,
)
from conversations.search.schema import (
    domain_facet_rows,
    fill_sql,
    install_sql,
    rebuild,
    recount_domain_facets,
    recount_sql,
    served_sql,
    uninstall_sql,
)
from conversations.search.snippets import SNIPPET_CONTEXT, cut, marked_head, snippet, snippets

__all__ = [
    "COUNTED",
    "DOMAIN",
    "FOLDED",
    "FTS_TABLE",
    "KEY_SHIFT",
    "MIN_QUERY",
    "MODEL",
    "PROVIDER",
    "SEARCH_ACTIVITY",
    "SEARCH_KEY_INDEX",
    "SERVED",
    "SITE",
    "SNIPPET_CONTEXT",
    "SOURCE_FTS_TABLE",
    "Pending",
    "any_match",
    "choices",
    "counted_matches",
    "cut",
    "domain_facet_rows",
    "fill_sql",
    "filtered",
    "folded",
    "forget",
    "insert_indexed",
    "insert_rows",
    "inserts_gathered",
    "install_sql",
    "marked_head",
    "matching",
    "move_counts",
    "owner_key",
    "provenance_chips",
    "rebuild",
    "recount_domain_facets",
    "recount_sql",
    "retitle",
    "served_sql",
    "served_value",
    "sites",
    "snippet",
    "snippets",
    "source_folded_matches",
    "source_matches",
    "source_text",
    "text_matches",
    "uninstall_sql",
    "with_facet",
    "write",
]
