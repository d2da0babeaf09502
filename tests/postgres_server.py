"""A throwaway PostgreSQL cluster for tests, from Debian's `postgresql` package (`make system-deps`).

initdb into a fresh folder, `pg_ctl start` on a free port with its unix socket in that folder
(no TCP), trust auth; stopped and removed at the end. PostgreSQL refuses to run as root, so
as root the server runs as `nobody`. Missing binaries are a failure, never a skip.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from live_server import free_port

RUN_AS = "nobody"


def find_bin_dir() -> Path:
    """PG_BIN, else the newest /usr/lib/postgresql/<ver>/bin, else initdb on PATH."""
    if os.environ.get("PG_BIN"):
        if not (Path(os.environ["PG_BIN"]) / "initdb").exists():
            raise FileNotFoundError(f"PG_BIN={os.environ['PG_BIN']} has no initdb: point it at a PostgreSQL bin folder")
        return Path(os.environ["PG_BIN"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise FileNotFoundError(
        "PostgreSQL server binaries not found (no /usr/lib/postgresql/<version>/bin/initdb, none on PATH, "
        "PG_BIN unset): install Debian's `postgresql` package, e.g. `make system-deps`")


@dataclass
class PostgresServer:
    bin_dir: Path
    root: Path
    port: int

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@/{dbname}?host={self.socket_dir}&port={self.port}"

    def _cmd(self, *args: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", RUN_AS, "--", *args]
        return list(args)

    def start(self) -> None:
        data, log = self.root / "data", self.root / "server.log"
        self.socket_dir.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, RUN_AS)
            shutil.chown(self.socket_dir, RUN_AS)
        subprocess.run(self._cmd(str(self.bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                 "-E", "UTF8", "--no-sync", "--no-instructions"),
                       check=True, capture_output=True, cwd=self.root)
        options = (f"-p {self.port} -k {self.socket_dir} -c listen_addresses='' -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        result = subprocess.run(self._cmd(str(self.bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log),
                                          "-o", options, "-w", "-t", "60", "start"),
                                capture_output=True, text=True, cwd=self.root)
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {result.stdout}{result.stderr}\n"
                               f"{log.read_text(errors='replace') if log.exists() else ''}")

    def stop(self) -> None:
        subprocess.run(self._cmd(str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate",
                                 "-w", "stop"), capture_output=True, cwd=self.root)
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def start_postgres() -> PostgresServer:
    bin_dir = find_bin_dir()
    # not under pytest's tmp folders: those are 0700 root's, and the server may run as nobody
    root = Path(tempfile.mkdtemp(prefix="grpo-pg-"))
    server = PostgresServer(bin_dir, root, free_port())
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server
