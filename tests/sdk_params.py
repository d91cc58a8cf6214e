"""Requests checked against the official SDKs' request types.

The Anthropic and OpenAI SDKs describe request bodies as ``TypedDict`` params. A pydantic
``TypeAdapter`` over them is too lenient to catch a wrong request (extra keys are ignored,
``Iterable`` fields are validated lazily, response models are accepted in unions), so
``errors(value, type)`` walks the annotations itself: every required key present, no key the
type does not name, literals and scalar types exact, unions matched by one alternative, lists
checked item by item. google-genai's types are pydantic models that forbid extra fields: they
validate the REST (camelCase) body themselves.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

import typing_extensions

# Fields the provider sends in a response item, and takes back in the same item as input, that
# the SDK's request type does not name (the SDK's own response models keep them as extras, so
# ``input += response.output`` sends them too).
SDK_GAPS = {
    ("Result", "vector_store_id"),  # OpenAI file_search_call results
    # Anthropic code_execution_result (with the 20260209 web tools): ``abort_reason: null``
    ("BetaCodeExecutionResultBlockParam", "abort_reason"),
}

_LISTS = (list, collections.abc.Iterable, collections.abc.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping)


def _unwrap(tp: Any) -> tuple[Any, str | None]:
    """The type under Annotated / Required / NotRequired / ReadOnly, and its wire alias."""
    alias = None
    while True:
        origin = typing_extensions.get_origin(tp)
        if origin is typing_extensions.Annotated:
            for meta in tp.__metadata__:
                alias = getattr(meta, "alias", None) or alias
            tp = tp.__origin__
        elif origin in (typing_extensions.Required, typing_extensions.NotRequired,
                        typing_extensions.ReadOnly, typing.Required, typing.NotRequired):
            tp = typing_extensions.get_args(tp)[0]
        elif isinstance(tp, typing_extensions.TypeAliasType):
            tp = tp.__value__
        else:
            return tp, alias


def errors(value: Any, tp: Any, path: str = "$") -> list[str]:
    """What is wrong with ``value`` as a ``tp`` (empty when it is one)."""
    tp, _ = _unwrap(tp)
    if tp is Any or tp is object:
        return []
    if tp is None or tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    origin = typing_extensions.get_origin(tp)
    args = typing_extensions.get_args(tp)
    if typing_extensions.is_typeddict(tp):
        return _typed_dict(value, tp, path)
    if origin in (typing.Union, types.UnionType):
        found = [errors(value, arg, path) for arg in args]
        if any(not e for e in found):
            return []
        # The alternative that got furthest into the value says best what is wrong.
        return max(found, key=lambda e: (max(len(x.split(":")[0]) for x in e), -len(e)))
    if origin in (typing.Literal, typing_extensions.Literal):
        return [] if value in args else [f"{path}: {value!r} is none of {args!r}"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string"]
    if origin in _LISTS or getattr(origin, "__name__", "") == "SequenceNotStr":
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        item = args[0] if args else Any
        return [e for n, v in enumerate(value) for e in errors(v, item, f"{path}[{n}]")]
    if origin in _MAPPINGS:
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        item = args[1] if len(args) > 1 else Any
        return [e for k, v in value.items() for e in errors(v, item, f"{path}.{k}")]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected an integer"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number"]
    if origin is typing.IO or tp in (typing.IO, typing.BinaryIO):
        return [f"{path}: a file, which JSON cannot hold"]
    if isinstance(tp, type) and hasattr(tp, "model_fields"):
        # A response model in a params union: a request is made of params, not of these.
        return [f"{path}: {tp.__name__} is a response model, not a request param"]
    if isinstance(tp, type):
        return [] if isinstance(value, tp) else [f"{path}: expected {tp.__name__}"]
    raise TypeError(f"{path}: cannot check against {tp!r}")


def _typed_dict(value: Any, tp: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({tp.__name__})"]
    hints = typing_extensions.get_type_hints(tp, include_extras=True)
    by_wire: dict[str, tuple[str, Any]] = {}
    for name, hint in hints.items():
        _, alias = _unwrap(hint)
        by_wire[alias or name] = (name, hint)
    required = set(getattr(tp, "__required_keys__", ()))
    found = [f"{path}: {tp.__name__} has no field {key!r}" for key in value
             if key not in by_wire and (tp.__name__, key) not in SDK_GAPS]
    for wire, (name, hint) in by_wire.items():
        if wire not in value:
            if name in required:
                found.append(f"{path}: {tp.__name__} needs {wire!r}")
            continue
        found.extend(errors(value[wire], hint, f"{path}.{wire}"))
    return found


def anthropic_errors(body: dict[str, Any]) -> list[str]:
    """The body against the Anthropic SDK's streaming Messages params (beta: the cassettes' API
    surface, where server tools like the advisor and MCP live)."""
    from anthropic.types.beta import message_create_params as beta

    return errors(body, beta.MessageCreateParamsStreaming)


def openai_errors(body: dict[str, Any], api: str = "responses") -> list[str]:
    if api == "chat":
        from openai.types.chat import completion_create_params as chat

        return errors(body, chat.CompletionCreateParamsStreaming)
    from openai.types.responses import response_create_params as responses

    return errors(body, responses.ResponseCreateParamsStreaming)


def google_errors(body: dict[str, Any]) -> list[str]:
    """The generateContent REST body: each content, tool and the generation config as
    google-genai's models read them (they forbid unknown fields)."""
    import pydantic
    from google.genai import types as genai

    found = []
    known = {"contents", "tools", "generationConfig", "systemInstruction", "toolConfig"}
    found += [f"$: unknown field {key!r}" for key in body if key not in known]
    checks: list[tuple[str, Any, Any]] = [
        *((f"$.contents[{n}]", genai.Content, c) for n, c in enumerate(body.get("contents", []))),
        *((f"$.tools[{n}]", genai.Tool, t) for n, t in enumerate(body.get("tools", []))),
    ]
    if "generationConfig" in body:
        checks.append(("$.generationConfig", genai.GenerationConfig, body["generationConfig"]))
    for path, model, value in checks:
        try:
            model.model_validate(value)
        except pydantic.ValidationError as exc:
            found.append(f"{path}: {exc}")
    return found
