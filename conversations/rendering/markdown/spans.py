"""Step 4 of span placement: sentinels in the parsed tokens become spans and markers.

Each inline token's children are rewritten as a small tree: text is split at sentinels, each
sentinel opens/closes sources (``Plan.apply``), and maximal runs of siblings cited by the same
set of sources are wrapped in ``<span class="cite" data-sources="1 3">``. Spans therefore nest
properly by construction; a span crossing blocks is closed at each block end and reopened in
the next. Markers follow the cited text; one that would land inside a link or code span is
moved after it, so a link the model wrote is never nested in another. Sentinels in attributes
(link targets) are taken out and take effect right after the element. Code blocks get their
escaped HTML with spans in ``token.meta``, which ``code_render_rule`` draws.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from markdown_it.common.utils import escapeHtml, unescapeAll
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from .cites import CITE_PLAN, Plan, span_open
from .sentinels import SENTINEL, SENTINEL_BASE, SENTINEL_SPLIT, is_sentinel, strip_sentinels

# Math token types (``math_plugin``), named here so citations need not import the plugin.
MATH_INLINE = frozenset({"math_inline", "math_inline_double"})
MATH_BLOCK_TOKENS = frozenset({"math_block", "amsmath"})


class _Mixed:
    """Uniformity value of an element whose descendants are cited differently."""


_MIXED = _Mixed()


_UNSET = object()


class _Elem:
    __slots__ = ("atomic", "close", "deferred", "kids", "open", "pending", "uniform")

    def __init__(self, open_token: Token | None, atomic: bool = False) -> None:
        self.open = open_token
        self.close: Token | None = None
        self.kids: list[Any] = []  # _Elem, or (token, key) leaves; key None: a marker
        self.atomic = atomic
        self.deferred: list[Any] = []  # markers to place after this (outermost atomic) element
        self.pending: list[int] = []  # sentinel ids found in attributes
        self.uniform: Any = _UNSET


@lru_cache(maxsize=4096)
def _html_token(content: str) -> Token:
    # Shared instances: the renderer only reads tokens, and markers/span tags repeat a lot.
    return Token("html_inline", "", 0, content=content)


def _text_token(content: str) -> Token:
    return Token("text", "", 0, content=content)


def _uniform(node: Any) -> Any:
    """A frozenset: all text inside is cited by exactly these sources; ``None``: a marker;
    ``_MIXED``: anything else (spans must go inside the element). Recursion depth is bounded
    by ``MAX_INLINE_DEPTH``."""
    if type(node) is tuple:
        return node[1]
    value = node.uniform
    if value is _UNSET:
        value = None
        for kid in node.kids:
            u = _uniform(kid)
            if u is None:
                continue
            if u is _MIXED or (value is not None and u != value):
                value = _MIXED
                break
            value = u
        if value is None:
            value = _MIXED if node.kids else frozenset()  # markers only: emit as they are
        node.uniform = value
    return value


def _emit_plain(node: Any, out: list[Token]) -> None:
    if type(node) is tuple:
        out.append(node[0])
        return
    if node.open is not None:
        out.append(node.open)
    for kid in node.kids:
        _emit_plain(kid, out)
    if node.close is not None:
        out.append(node.close)


def _emit(kids: list[Any], out: list[Token]) -> None:
    """Flatten the tree back into tokens, wrapping each maximal run of siblings cited by the
    same (non-empty) set of sources in one span."""
    i = 0
    count = len(kids)
    while i < count:
        node = kids[i]
        u = _uniform(node)
        if u and type(u) is frozenset:
            j = i + 1
            while j < count and _uniform(kids[j]) == u:
                j += 1
            out.append(_html_token(span_open(u)))
            for k in range(i, j):
                _emit_plain(kids[k], out)
            out.append(_html_token("</span>"))
            i = j
            continue
        if u is _MIXED:
            if node.open is not None:
                out.append(node.open)
            _emit(node.kids, out)
            if node.close is not None:
                out.append(node.close)
        else:
            _emit_plain(node, out)
        i += 1


def _rewrite_inline(token: Token, plan: Plan, expected: list[int]) -> None:
    root = _Elem(None)
    stack = [root]
    atomic: list[_Elem] = []  # atomic elements currently open, outermost first

    def add_markers(markers: list[str]) -> None:
        leaves = [(_html_token(m), None) for m in markers]
        if atomic:
            atomic[0].deferred.extend(leaves)
        else:
            stack[-1].kids.extend(leaves)

    def add_text(content: str, make: Any = _text_token) -> None:
        for part in SENTINEL_SPLIT.split(content):
            if not part:
                continue
            if len(part) == 1 and is_sentinel(part):
                add_markers(plan.apply(ord(part) - SENTINEL_BASE))
            else:
                stack[-1].kids.append((make(part), plan.key))

    for child in token.children or []:
        if child.nesting == 1:
            elem = _Elem(child, atomic=child.type == "link_open")
            for name, value in list(child.attrs.items()):
                if isinstance(value, str):
                    clean, ids = strip_sentinels(value)
                    if ids:
                        child.attrs[name] = clean
                        elem.pending.extend(ids)
            stack[-1].kids.append(elem)
            stack.append(elem)
            if elem.atomic:
                atomic.append(elem)
        elif child.nesting == -1:
            if len(stack) == 1:
                stack[0].kids.append((child, plan.key))
                continue
            elem = stack.pop()
            elem.close = child
            if atomic and atomic[-1] is elem:
                atomic.pop()
            if elem.atomic and not atomic:
                # Markers from inside the link: after it, never nested in it.
                stack[-1].kids.extend(elem.deferred)
                elem.deferred = []
            for sid in elem.pending:  # boundaries from the link target: right after the link
                add_markers(plan.apply(sid))
        elif child.type == "text":
            if SENTINEL.search(child.content):
                add_text(child.content)
            else:
                stack[-1].kids.append((child, plan.key))
        elif child.type in MATH_INLINE and SENTINEL.search(child.content):
            # A formula is one leaf: cited by every source open anywhere inside it, with the
            # markers of the boundaries inside it after it.
            child.content, ids = strip_sentinels(child.content)
            keys = set(plan.key)
            found: list[str] = []
            for sid in ids:
                found += plan.apply(sid)
                keys |= plan.key
            stack[-1].kids.append((child, frozenset(keys)))
            add_markers(found)
        elif child.type == "code_inline" and SENTINEL.search(child.content):
            code = _Elem(_html_token("<code>"), atomic=True)
            code.close = _html_token("</code>")
            stack[-1].kids.append(code)
            stack.append(code)
            atomic.append(code)
            add_text(child.content)
            stack.pop()
            atomic.pop()
            if not atomic:
                stack[-1].kids.extend(code.deferred)
                code.deferred = []
        else:
            if child.content and SENTINEL.search(child.content):
                child.content = strip_sentinels(child.content)[0]
            stack[-1].kids.append((child, plan.key))

    # Boundaries the inline parse swallowed (e.g. inside a reference label): end of block.
    lost = [sid for sid in expected if sid not in plan.seen]
    for sid in lost:
        root.kids.extend((_html_token(m), None) for m in plan.apply(sid))

    out: list[Token] = []
    _emit(root.kids, out)
    token.children = out


def _code_pieces(content: str, plan: Plan) -> tuple[list[tuple[str, frozenset[int]]], str]:
    """Code as ``(text, sources)`` runs, and the markers to put after the code element."""
    pieces: list[tuple[str, frozenset[int]]] = []
    markers: list[str] = []
    for part in SENTINEL_SPLIT.split(content):
        if not part:
            continue
        if len(part) == 1 and is_sentinel(part):
            markers.extend(plan.apply(ord(part) - SENTINEL_BASE))
        else:
            pieces.append((part, plan.key))
    return pieces, "".join(markers)


def _math_block(token: Token, plan: Plan, expected: list[int]) -> None:
    """A display formula is cited whole: by every source open anywhere inside it."""
    keys = set(plan.key)
    markers: list[str] = []
    for sid in expected:
        markers += plan.apply(sid)
        keys |= plan.key
    token.content = strip_sentinels(token.content)[0]
    token.meta = {**(token.meta or {}), "cite_markers": "".join(markers),
                  "cite_open": span_open(frozenset(keys)) if keys else ""}  # fmt: skip


def place_spans(state: StateCore) -> None:
    """Core rule, last: sentinels become spans and markers (inline), or escaped code with
    spans (fences and code blocks, drawn by ``code_render_rule``)."""
    plan: Plan | None = state.env.get(CITE_PLAN)
    if plan is None:
        return
    for index, token in enumerate(state.tokens):
        expected = plan.token_sentinels.get(index)
        if token.type == "inline":
            if expected:
                _rewrite_inline(token, plan, expected)
            elif plan.key and token.children:
                # Inside a cited range with no boundary here: one span around the block.
                token.children = [
                    _html_token(span_open(plan.key)),
                    *token.children,
                    _html_token("</span>"),
                ]
        elif token.type in ("fence", "code_block") and (expected or plan.key):
            pieces, markers = _code_pieces(token.content, plan)
            lost = [sid for sid in expected or () if sid not in plan.seen]
            markers += "".join(m for sid in lost for m in plan.apply(sid))
            token.content = strip_sentinels(token.content)[0]
            token.meta = {**(token.meta or {}), "cite_pieces": pieces, "cite_markers": markers}
        elif token.type in MATH_BLOCK_TOKENS and (expected or plan.key):
            _math_block(token, plan, expected or [])
    if plan.trailer:
        trailer = [m for sid in plan.trailer for m in plan.apply(sid)]
        if trailer:
            paragraph = Token("paragraph_open", "p", 1, block=True)
            inline = Token("inline", "", 0, children=[_html_token(m) for m in trailer])
            state.tokens.extend([paragraph, inline, Token("paragraph_close", "p", -1, block=True)])


RenderRule = Callable[[list[Token], int, Any, Any], str]


def code_render_rule(name: str, default: RenderRule) -> Callable[..., str]:
    """The render rule for ``fence`` or ``code_block``: the cited runs ``place_spans`` left in
    the token's meta (``cite_pieces``), escaped, with spans; else ``default`` (the rule it
    replaces). A default that draws the runs itself (``highlight_plugin``'s, marked
    ``draws_cite_pieces``) draws them in both cases."""
    if getattr(default, "draws_cite_pieces", False):
        return default

    def rule(self: RendererHTML, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        meta = token.meta or {}
        if "cite_pieces" not in meta:
            return default(tokens, idx, options, env)
        cls = ""
        if name == "fence":
            info = unescapeAll(token.info).strip() if token.info else ""
            lang = info.split(maxsplit=1)[0] if info else ""
            cls = f' class="{escapeHtml(options.langPrefix + lang)}"' if lang else ""
        body = "".join(span_open(key) + escapeHtml(text) + "</span>" if key else escapeHtml(text)
                       for text, key in meta["cite_pieces"])  # fmt: skip
        return f"<pre><code{cls}>{body}</code>{meta['cite_markers']}</pre>\n"

    return rule
