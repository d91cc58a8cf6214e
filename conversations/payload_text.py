"""Provider payloads as text for people to read (the admin's payload inspector, a turn's native
payloads on its page): sizes, JSON laid out one value per line (a preview cut short too), and
whether a payload decodes with its provider's adapter. Escaping is the templates' job."""

from __future__ import annotations

import orjson

import providers


def human_size(size: int) -> str:
    for unit in ("bytes", "KB", "MB"):
        if size < 1024 or unit == "MB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} bytes"  # pragma: no cover


def decodes(provider: str, format: str, value_json: str) -> bool | None:
    """Does the payload decode with its provider's adapter? None: no adapter to ask."""
    try:
        adapter = providers.adapter(provider)
    except ValueError:  # a provider no adapter here reads
        return None
    decode = getattr(adapter, "decode", None)
    if decode is None:
        return None
    try:
        decode(orjson.loads(value_json), format)
    except orjson.JSONDecodeError:
        return False
    except Exception:
        return False
    return True


def pretty_json_prefix(text: str, indent: int = 2) -> str:
    """JSON text (possibly cut short, as a large payload's preview is) laid out one value per
    line. Reads only the structure (brackets, commas, colons outside strings), so a truncated
    prefix is laid out as far as it goes; the characters themselves are kept as stored."""
    out: list[str] = []
    depth = 0
    in_string = escaped = False
    pad = " " * indent
    for ch in text:
        if in_string:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch in " \t\r\n":
            continue
        if ch == '"':
            in_string = True
            out.append(ch)
        elif ch in "{[":
            depth += 1
            out.append(ch + "\n" + pad * depth)
        elif ch in "}]":
            depth = max(0, depth - 1)
            out.append("\n" + pad * depth + ch)
        elif ch == ",":
            out.append(",\n" + pad * depth)
        elif ch == ":":
            out.append(": ")
        else:
            out.append(ch)
    return "".join(out)


def pretty_json(text: str) -> str:
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return pretty_json_prefix(text)
