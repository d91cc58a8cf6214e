"""The one mapping of refused input to ``CommandError`` for the commands that read files
(``ingest``, ``import``): the message says what is wrong and where, the exit status is non-zero,
and nothing is written (both write in one transaction, after reading everything)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import CommandError


@contextmanager
def refused_input(name: str = "") -> Iterator[None]:
    """Turn a refusal of the input into a ``CommandError``, prefixed with ``name`` (the file)
    when the error does not already name it.

    Every refusal is a ``ValueError``: ``MalformedInput`` (it names the file and line itself),
    ``InvalidDocument``, ``ProvenanceError``, ``UnregisteredValue``, an unknown provider."""
    try:
        yield
    except ValueError as exc:
        raise CommandError(f"{name}: {exc}" if name else str(exc)) from None
