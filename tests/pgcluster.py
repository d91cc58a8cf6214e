"""A private PostgreSQL cluster for the fault tests: ``initdb`` in a temporary directory, served
on a free port of 127.0.0.1 by ``pg_ctl``, stopped and started at will (a database outage), and
removed afterwards. Uses the binaries this machine has (``/usr/lib/postgresql/*/bin``).

PostgreSQL refuses to run as root; as root (CI) the cluster runs as the ``postgres`` system user
that Debian's packages create."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.live.e2e import free_port


def binaries() -> Path | None:
    """The newest PostgreSQL's bin directory that has ``initdb`` and ``pg_ctl``, if any."""
    found = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    found = [p for p in found if (p / "pg_ctl").exists()]
    found.sort(key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not found and (which := shutil.which("initdb")) and shutil.which("pg_ctl"):
        return Path(which).parent
    return found[-1] if found else None


def unavailable() -> str | None:
    """Why a private cluster cannot run here (a skip reason), or None."""
    if binaries() is None:
        return "no initdb / pg_ctl on this machine (/usr/lib/postgresql/*/bin)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and no postgres user to run a private cluster as"
    return None


class Cluster:
    """One private cluster; ``url(name)`` for a database on it."""

    def __init__(self) -> None:
        bin_ = binaries()
        assert bin_ is not None, unavailable()
        self.bin = bin_
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="turnscope-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self._user: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            self._user = pwd.getpwnam("postgres")
            os.chown(self.dir, self._user.pw_uid, self._user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E",
                  "UTF8", "--no-sync", "--no-instructions")

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        command = [str(self.bin / tool), *args]
        if self._user is not None:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, cwd=self.dir, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed: {done.stderr[-2000:]}\n{log}")

    def start(self) -> None:
        # fsync off: nothing here outlives the test, and the machine is shared.
        options = f"-p {self.port} -h 127.0.0.1 -k {self.dir} -F -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
                  "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends every connection and shuts down cleanly; ``immediate`` is a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def url(self, name: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def create(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    try:
        made.start()
        yield made
    finally:
        made.remove()
