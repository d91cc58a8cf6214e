"""Business actions on conversations: each writes and announces what changed.

A view (the pages, the API, the admin, the live endpoints) decides who may act and what to
answer; the action does the write and, once it has committed, tells the pages open on it
(``announce``): an open conversation page sees a rename or a delete, an open list sees
conversations added, renamed and removed. ``tests/conversations/test_actions.py`` checks, for
each action, that what a page held before plus what was announced equals a fresh fetch.
"""
