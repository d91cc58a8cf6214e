"""Oversize request bodies against a real daphne, measured on the server process: three 1 GiB
attempts at once, on the login page, the upload and the proxy, declared (``Content-Length``) and
chunked. Each is answered 413 (declared: before any of the body is read; chunked: as soon as it
passes its endpoint's cap), the server's peak RSS grows by at most 50 MB, and no temporary file
grows past its endpoint's cap.

Memory is read from ``/proc/<pid>/status`` (``VmHWM``: the peak resident set since the process
started) and temporary files from ``/proc/<pid>/fd``, not timed."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
from pathlib import Path

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GIB = 1024 * 1024 * 1024
MB = 1024 * 1024
BLOCK = b"a" * MB
PROXY_CAP = 32 * MB
UPLOAD_CAP = 48 * MB  # set small here: a chunked attempt is read up to its cap
PAGE_CAP = 16 * MB
TARGETS = {  # path, content type, cap
    "login": ("/accounts/login/", "application/x-www-form-urlencoded", PAGE_CAP),
    "upload": ("/upload/", "multipart/form-data; boundary=xyz", UPLOAD_CAP),
    "proxy": ("/proxy/anthropic/v1/messages", "application/json", PROXY_CAP),
}


def status_of(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) * 1024
    return out


def temporary_files(pid: int) -> dict[str, int]:
    """The sizes of the regular files the server holds open that are deleted (temporary)."""
    sizes = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if "(deleted)" in target or "#" in target:  # an unlinked or O_TMPFILE file
                sizes[fd] = os.stat(f"/proc/{pid}/fd/{fd}").st_size
    return sizes


def attempt(port: int, path: str, content_type: str, *, chunked: bool) -> tuple[int | None, int]:
    """Send a 1 GiB body until the server answers or hangs up: (its status or None, bytes
    sent)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        framing = ("Transfer-Encoding: chunked" if chunked else f"Content-Length: {GIB}")
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}"
                     f"\r\n{framing}\r\n\r\n".encode())
        block = (b"%x\r\n" % len(BLOCK)) + BLOCK + b"\r\n" if chunked else BLOCK
        try:
            while sent < GIB:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break  # the server answered (or hung up): stop sending
                sock.sendall(block)
                sent += len(BLOCK)
        except OSError:
            pass  # the server dropped the connection while we were still sending
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
    if not answer.startswith(b"HTTP/1.1 "):
        return None, sent
    return int(answer.split()[1]), sent


def test_three_parallel_1gib_bodies_are_refused_with_flat_memory_and_bounded_temp_files(
    tmp_path,
):
    env = e2e.base_env(tmp_path, TURNSCOPE_IMPORT_MAX_BYTES=str(UPLOAD_CAP),
                       TURNSCOPE_PROXY_MAX_BODY_BYTES=str(PROXY_CAP),
                       TURNSCOPE_MAX_UPLOAD_BYTES=str(PAGE_CAP))
    e2e.prepare(env)
    server = e2e.Daphne(env, tmp_path / "daphne.log")
    pid = server.proc.pid
    try:
        for name, (path, content_type, _) in TARGETS.items():  # warm every path up
            status, _ = small(server.port, path, content_type)
            assert status is not None and status != 413, name
        before = status_of(pid)["VmHWM"]
        largest: dict[str, int] = {}
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                for fd, size in temporary_files(pid).items():
                    largest[fd] = max(largest.get(fd, 0), size)
                done.wait(0.01)

        watcher = threading.Thread(target=watch)
        watcher.start()
        results: dict[tuple[str, bool], tuple[int | None, int]] = {}
        try:
            for chunked in (False, True):
                def one(name: str, path: str, ctype: str, chunked: bool) -> None:
                    results[name, chunked] = attempt(server.port, path, ctype, chunked=chunked)

                threads = [threading.Thread(target=one, args=(name, path, ctype, chunked))
                           for name, (path, ctype, _) in TARGETS.items()]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(120)
        finally:
            done.set()
            watcher.join()
        after = status_of(pid)["VmHWM"]
        for (name, chunked), (status, sent) in results.items():
            cap = TARGETS[name][2]
            assert status == 413, (name, chunked, status)
            if not chunked:  # answered before the body: at most what was in flight
                assert sent < 64 * MB, (name, sent)
            else:  # cut at its cap, not read to the end
                assert sent < cap + 64 * MB, (name, sent)
        growth = after - before
        print(f"\nserver peak RSS {before / MB:.0f} -> {after / MB:.0f} MB "
              f"(growth {growth / MB:.1f} MB); largest temporary file "
              f"{max(largest.values(), default=0) / MB:.1f} MB")
        assert growth <= 50 * MB
        assert max(largest.values(), default=0) <= UPLOAD_CAP
        # the server is still there and answers
        status, _ = small(server.port, "/accounts/login/", "text/plain", method="GET")
        assert status == 200
    finally:
        server.stop()


def small(port: int, path: str, content_type: str, method: str = "POST") -> tuple[int | None,
                                                                                   int]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        body = b"x=1" if method == "POST" else b""
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     f"{content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
                     f"\r\n".encode() + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split()[1]), len(body)
