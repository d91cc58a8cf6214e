"""What a provider provides: everything Turnscope knows of one provider's wire, behind one
typed ``Provider`` protocol. Each provider package (``providers/<p>/``) has a ``provider``
module whose object satisfies it; ``providers.registry`` lists them, and the rest of the app
reaches a provider only through that registry (an import contract in ``pyproject.toml`` and
``tests/providers/test_registry.py`` hold it there).

What a provider provides:

* its names: ``name`` (what payloads and ``agent.model`` store), ``label`` (what a person
  reads), ``package`` (the producer of the vocabulary its adapters register);
* the response side: ``parser`` / ``parse`` / ``decode`` / ``formats`` (``providers.protocol``),
  and ``signature``: frame shapes only its wire has (how a recording file is told apart);
* the request side: ``build_request`` / ``build_continuation`` (``providers.requests``: the
  next request from stored turns) and ``read_request`` (what a proxied request body holds:
  ``providers.proxied``; ``endpoint`` is the proxy's name for the API it was sent to,
  ``api_version`` the version header, ``url`` the URL it was sent to) and
  ``proxied_endpoint`` (which of its API's endpoints a ``POST`` path is, by the proxy's name
  for it: the ones the proxy records; None for one it only forwards);
* its error shape both ways: ``error_body`` (what its SDK expects) and ``error_code`` (the
  machine-readable code in an error it sent);
* the recorded stand-in's side: ``stand_in`` (``providers.standin``: its API's paths, how its
  streams are framed, what a client holds of a served response and the rules a request
  sending it back must keep);
* where it answers: ``api_url`` (its public API's base URL);
* live calls: ``key_variable`` (the environment variable holding the key), ``models``
  (offered in the composer), ``auth_header`` (where the key goes) and ``model_refused``
  (characters a model name cannot hold in its request: Gemini's is a URL path segment).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from providers.protocol import ResponseParser, WireContext
from providers.proxied import ProxiedRequest
from providers.requests import PriorTurn, TurnRequest, UpstreamRequest
from providers.standin import StandIn
from providers.wire import Row, WireInput, WireKind
from streams.parts import Part


class Provider(Protocol):
    """One provider, as the rest of Turnscope sees it."""

    name: str
    label: str
    package: str
    formats: tuple[str, ...]
    api_url: str
    key_variable: str
    models: tuple[str, ...]
    model_refused: str
    stand_in: StandIn
    signature: re.Pattern[bytes]

    # -- responses ---------------------------------------------------------------------------

    def parser(self, context: WireContext, kind: WireKind, first: Row) -> ResponseParser: ...

    def parse(self, wire: WireInput, context: WireContext) -> Iterator[Part]: ...

    def decode(self, value: Any, format: str) -> None: ...

    # -- requests ----------------------------------------------------------------------------

    def build_request(
        self, history: Sequence[PriorTurn], turn: TurnRequest
    ) -> UpstreamRequest: ...

    def build_continuation(
        self, history: Sequence[PriorTurn], turn: TurnRequest, paused: PriorTurn
    ) -> UpstreamRequest: ...

    def read_request(
        self, body: dict[str, Any], endpoint: str, api_version: str | None, url: str
    ) -> ProxiedRequest: ...

    def proxied_endpoint(self, path: str) -> str | None: ...

    # -- errors ------------------------------------------------------------------------------

    def error_body(self, status: int, code: str, message: str) -> dict[str, Any]: ...

    def error_code(self, error: dict[str, Any]) -> str: ...

    # -- live calls --------------------------------------------------------------------------

    def auth_header(self, key: str) -> tuple[str, str]: ...


def error_code(error: dict[str, Any]) -> str:
    """The code of an error in the common shape (``{"code": …}`` or ``{"type": …}``): what a
    provider without a shape of its own, or a gateway, sends."""
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and value:
            return value
    return ""
