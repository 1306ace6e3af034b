"""A real PostgreSQL (Debian's package) on 127.0.0.1 for as long as a block runs: a fresh
cluster in a temporary folder, trust authentication, one database. As root it runs as the
``postgres`` user (PostgreSQL refuses to run as root)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.prefect_server import free_port


def postgres_bin() -> Path:
    """The folder of Debian's PostgreSQL programs (``make postgres`` installs them)."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not versions:
        raise RuntimeError(
            "PostgreSQL is not installed: make postgres (apt-get install postgresql)"
        )
    return Path(versions[-1]).parent


@contextmanager
def postgres_server(database: str = "prefect") -> Iterator[str]:
    """A ``postgresql+asyncpg://`` URL of ``database`` on a cluster started now."""
    bin_dir = postgres_bin()
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="ns-postgres-"))
    if os.getuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
    data, port = folder / "data", free_port()

    def run(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)

    try:
        run(
            str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"
        )
        options = f"-h 127.0.0.1 -p {port} -k {folder} -c fsync=off"
        run(
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-w",
            "-l",
            str(folder / "log"),
            "start",
        )
        try:
            run(
                str(bin_dir / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "postgres",
                database,
            )
            yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/{database}"
        finally:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
