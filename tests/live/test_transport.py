"""live.transport: Twisted TCP connections send at once when nothing is buffered, and keep
Twisted's buffered path (order, back-pressure, disconnects) for everything else; autobahn's log
arguments are not coloured.

Both patch upstream code, so canaries pin it: the source of what each patch replaces or reads
(an upgrade that changes it fails here: re-read the patch against the new code, then update the
fingerprint), and the cost each removes (if upstream stops paying it, drop the patch). The
versions they were written for are bounded in pyproject.toml."""

from __future__ import annotations

import inspect
import socket

import autobahn.util
import click
import pytest
from autobahn.websocket.protocol import WebSocketProtocol
from twisted.internet import abstract, main, tcp

from live import transport
from tests.support import source_fingerprint


class Reactor:
    """Just enough of a reactor: records which descriptors want write events."""

    def __init__(self) -> None:
        self.writers: set[object] = set()

    def addWriter(self, writer: object) -> None:  # Twisted's names
        self.writers.add(writer)

    def removeWriter(self, writer: object) -> None:
        self.writers.discard(writer)


@pytest.fixture
def patched(monkeypatch):
    monkeypatch.setattr(tcp.Connection, "write", transport._write)


@pytest.fixture
def pair():
    ours, peer = socket.socketpair()
    reactor = Reactor()
    connection = tcp.Connection(ours, protocol=None, reactor=reactor)
    connection.connected = 1
    yield connection, peer, reactor
    ours.close()
    peer.close()


def read_all(peer: socket.socket) -> bytes:
    peer.setblocking(False)
    out = b""
    while True:
        try:
            chunk = peer.recv(1 << 20)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def drain(connection, reactor, peer) -> bytes:
    """Run the reactor's write events and read what the peer got, until nothing is left."""
    got = b""
    for _ in range(10_000):
        got += read_all(peer)
        if connection not in reactor.writers:
            return got + read_all(peer)
        assert connection.doWrite() is None
    raise AssertionError("the buffer never drained")


def test_installed_by_the_asgi_module():
    import autobahn.util

    import turnscope.asgi  # noqa: F401

    assert tcp.Connection.write is transport._write
    assert not autobahn.util._HAS_CLICK  # plain per-frame debug arguments


def test_a_write_with_nothing_buffered_is_sent_at_once(patched, pair):
    connection, peer, reactor = pair
    connection.write(b"frame one")
    connection.write(b"frame two")
    assert reactor.writers == set()  # never registered with the selector
    assert read_all(peer) == b"frame oneframe two"


def test_what_the_kernel_does_not_take_is_buffered_and_order_kept(patched, pair):
    connection, peer, reactor = pair
    connection.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = bytes(range(256)) * 4096  # 1 MiB: more than the socket takes at once
    connection.write(big)
    assert connection in reactor.writers  # the rest waits for write events
    connection.write(b"after")  # something is buffered: this one queues behind it
    assert drain(connection, reactor, peer) == big + b"after"
    assert reactor.writers == set()


def test_a_lost_connection_takes_the_buffered_path_and_is_reported(patched, pair):
    connection, peer, reactor = pair
    peer.close()
    connection.write(b"into the void")  # no exception here
    assert connection in reactor.writers
    assert isinstance(connection.doWrite(), type(main.CONNECTION_LOST))


def test_tls_and_closing_connections_are_left_to_twisted(patched, pair):
    connection, peer, reactor = pair
    through_tls = []
    connection.TLS = True
    connection.protocol = type("TLS", (), {"write": lambda _, data: through_tls.append(data)})()
    connection.write(b"x")
    assert through_tls == [b"x"] and read_all(peer) == b""
    del connection.TLS
    reactor.writers.clear()
    connection._tempDataBuffer, connection._tempDataLen = [], 0
    connection.disconnecting = True
    connection.write(b"y")
    assert connection in reactor.writers and read_all(peer) == b""


# -- canaries ----------------------------------------------------------------------------------


def test_the_twisted_code_the_immediate_send_stands_in_for_is_unchanged():
    """``_write`` replaces ``tcp.Connection.write`` (``_newtls.ConnectionMixin.write``: the TLS
    layer, else ``FileDescriptor.write``) and sends only in the state ``doWrite`` leaves when
    its buffers are empty, through ``writeSomeData`` (an int, or an exception for a lost
    connection): Twisted 26.10."""
    assert transport._buffered_write.__qualname__ == "ConnectionMixin.write"
    assert transport._buffered_write.__module__ == "twisted.internet._newtls"
    assert {name: source_fingerprint(code) for name, code in [
        ("_newtls.ConnectionMixin.write", transport._buffered_write),
        ("FileDescriptor.write", abstract.FileDescriptor.write),
        ("FileDescriptor.doWrite", abstract.FileDescriptor.doWrite),
        ("tcp.Connection.writeSomeData", tcp.Connection.writeSomeData),
    ]} == {
        "_newtls.ConnectionMixin.write": "9a1ac7496539526b",
        "FileDescriptor.write": "b3410de7a82777bb",
        "FileDescriptor.doWrite": "33b469b3af894e6a",
        "tcp.Connection.writeSomeData": "e3d4a1d1f7d66a15",
    }


def test_without_the_patch_twisted_defers_every_write_to_the_selector(pair, monkeypatch):
    """The cost the patch removes (if Twisted stops paying it, drop the patch)."""
    monkeypatch.setattr(tcp.Connection, "write", transport._buffered_write)
    connection, peer, reactor = pair
    connection.write(b"buffered")
    assert connection in reactor.writers and read_all(peer) == b""


def test_the_autobahn_flag_is_what_colours_its_log_arguments():
    """``hl`` reads the module global ``_HAS_CLICK`` on every call: autobahn 26.10."""
    assert source_fingerprint(autobahn.util.hl) == "f17ac08c2642c446"


def test_autobahn_formats_coloured_log_arguments_for_every_frame_it_sends(monkeypatch):
    """The cost the flag removes (if autobahn stops paying it, drop the flag): ``sendData``
    builds its debug arguments with ``hltype``/``hlval`` whether or not debug is on, and with
    click importable they are styled."""
    send_data = inspect.getsource(WebSocketProtocol.sendData)
    assert "hltype(self.sendData)" in send_data and "hlval(" in send_data
    monkeypatch.setattr(autobahn.util, "_HAS_CLICK", True)
    assert autobahn.util.hl("x") == click.style("x", fg="yellow", bold=False) != "x"
    monkeypatch.setattr(autobahn.util, "_HAS_CLICK", False)
    assert autobahn.util.hl("x") == "x"
