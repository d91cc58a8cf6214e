"""live.transport: Twisted TCP connections send at once when nothing is buffered, and keep
Twisted's buffered path (order, back-pressure, disconnects) for everything else."""

from __future__ import annotations

import socket

import pytest
from twisted.internet import main, tcp

from live import transport


class Reactor:
    """Just enough of a reactor: records which descriptors want write events."""

    def __init__(self) -> None:
        self.writers: set[object] = set()

    def addWriter(self, writer: object) -> None:  # Twisted's names
        self.writers.add(writer)

    def removeWriter(self, writer: object) -> None:
        self.writers.discard(writer)


@pytest.fixture
def patched():
    transport.send_immediately()
    yield
    transport.restore()


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


def test_restore_puts_twisted_back(pair):
    transport.restore()
    connection, peer, reactor = pair
    connection.write(b"buffered")
    assert connection in reactor.writers and read_all(peer) == b""
    transport.send_immediately()  # as the asgi module left it
