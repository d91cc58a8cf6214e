"""The consumer's close codes reach a client through daphne (autobahn refuses the protocol's
own 1003/1008/1009 from an application: the client saw an abnormal close instead)."""

from __future__ import annotations

import pytest

from live import consumers
from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("close-codes")
    env = e2e.base_env(tmp)
    setup = e2e.prepare(env)
    server = e2e.Daphne(env, tmp / "daphne.log")
    yield setup, server
    server.stop()


def close_code(world, *frames) -> int:
    sync_client = pytest.importorskip("websockets.sync.client")
    from websockets.exceptions import ConnectionClosed

    setup, server = world
    url = f"ws://127.0.0.1:{server.port}/ws/conversations/{setup['watch'][0]}/"
    with sync_client.connect(url, origin=server.url, open_timeout=10,
                             additional_headers={"Cookie": f"sessionid={setup['session']}"}) as ws:
        assert '"hello"' in ws.recv(timeout=10)
        try:
            for frame in frames:
                ws.send(frame)
            while True:
                ws.recv(timeout=10)
        except ConnectionClosed as closed:
            assert closed.rcvd is not None, "closed without a close frame"
            return closed.rcvd.code
    raise AssertionError("unreachable")


def test_a_binary_frame_closes_with_4415(world):
    assert close_code(world, b"\x00\x01") == consumers.CLOSE_UNSUPPORTED == 4415


def test_an_oversized_frame_closes_with_4413(world):
    assert close_code(world, '{"type": "ping", "pad": "' + "x" * 2000 + '"}') == 4413


def test_malformed_messages_close_with_4400(world):
    assert close_code(world, *["not json"] * consumers.MAX_BAD_MESSAGES) == 4400


def test_too_many_messages_close_with_4429(world):
    frames = ['{"type": "ping"}'] * (consumers.RATE_LIMIT + 1)
    assert close_code(world, *frames) == 4429


def test_a_page_of_another_port_is_refused_at_the_handshake(world):
    """The reported hijack, on a real server: a page on another port of the same host."""
    sync_client = pytest.importorskip("websockets.sync.client")
    from websockets.exceptions import InvalidStatus

    setup, server = world
    url = f"ws://127.0.0.1:{server.port}/ws/conversations/{setup['watch'][0]}/"
    with pytest.raises(InvalidStatus) as refused:
        sync_client.connect(url, origin=f"http://127.0.0.1:{e2e.free_port()}", open_timeout=10,
                            additional_headers={"Cookie": f"sessionid={setup['session']}"})
    assert refused.value.response.status_code == 403
