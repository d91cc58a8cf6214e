"""Validation of export documents against the JSON Schema shipped in ``schemas/``."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import best_match

from streams.errors import MAX_JSON_DEPTH, MalformedInput, check_depth

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "export.schema.json"


class InvalidDocument(ValueError):
    """The document does not follow the export contract."""


@functools.cache
def _validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


def validate_export(doc: Any) -> None:
    """Raise ``InvalidDocument`` naming the first problem (path and message)."""
    try:
        check_depth(doc, MAX_JSON_DEPTH)  # before the validator recurses into it
    except MalformedInput as exc:
        raise InvalidDocument(f"(document): {exc.message}") from None
    error = best_match(_validator().iter_errors(doc))
    if error is None:
        return
    where = "/".join(str(p) for p in error.absolute_path) or "(document)"
    raise InvalidDocument(f"{where}: {error.message[:300]}")
