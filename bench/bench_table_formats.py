"""Delta Lake (delta-rs) as the warehouse's table format in a bucket: many writers, kills,
exactly once, compaction while they write; a measurement toward choosing that format.

A real S3-compatible server runs on 127.0.0.1 (moto's server mode). N writer processes each
append M batches of R rows to one Delta table in the bucket; every batch's commit carries a
Delta app transaction (app id = the writer, version = the batch), so a writer started again
after a kill asks the table for its last committed batch and goes on after it (exactly once
per batch without a lock service). One writer is SIGKILLed at a random moment and started
again; meanwhile a compactor process runs `optimize.compact()` in a loop. Printed: commits a
second, rows lost or doubled per (writer, batch), the compactor's successes and failures,
the files left, and the time to read the whole table through DuckDB (Arrow).

`python bench/bench_table_formats.py [--writers 4] [--batches 100] [--rows 200]` (deltalake and
moto's server come with the `bench` extra). DuckLake's side of this comparison is still to
be written.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUCKET = "needlescope-bench"
TABLE = f"s3://{BUCKET}/warehouse/answers"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def storage(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def writer(endpoint: str, name: str, batches: int, rows: int) -> None:
    """Append batches after the last this writer committed (the table says which)."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    options = storage(endpoint)
    try:
        done = DeltaTable(TABLE, storage_options=options).transaction_version(name) or 0
    except Exception:
        done = 0
    for batch in range(done + 1, batches + 1):
        data = pa.table(
            {
                "writer": [name] * rows,
                "batch": [batch] * rows,
                "row": list(range(rows)),
                "payload": ["x" * 200] * rows,
            }
        )
        write_deltalake(
            TABLE,
            data,
            mode="append",
            storage_options=options,
            commit_properties=CommitProperties(
                app_transactions=[Transaction(name, batch)], max_commit_retries=1000
            ),
        )


def compactor(endpoint: str, stop_file: str) -> None:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    ok = failed = 0
    while not os.path.exists(stop_file):
        try:
            DeltaTable(TABLE, storage_options=storage(endpoint)).optimize.compact()
            ok += 1
        except TableNotFoundError:
            pass  # no writer has committed yet
        except Exception as exc:
            failed += 1
            print(f"compaction failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        time.sleep(0.5)
    print(f"compactions: {ok} ok, {failed} failed", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="ns-bench-formats-"))
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import boto3
        import duckdb
        from deltalake import DeltaTable

        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)
        me = [sys.executable, __file__]

        def start(role: str, *more: str) -> subprocess.Popen[bytes]:
            return subprocess.Popen([*me, "--role", role, endpoint, *more])

        stop_file = str(work / "stop")
        started = time.monotonic()
        names = [f"w{i}" for i in range(args.writers)]
        procs = {n: start("writer", n, str(args.batches), str(args.rows)) for n in names}
        comp = start("compactor", stop_file)
        victim = rng.choice(names)
        time.sleep(rng.uniform(2.0, 6.0))
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        procs[victim] = start("writer", victim, str(args.batches), str(args.rows))
        codes = {n: p.wait() for n, p in procs.items()}
        wall = time.monotonic() - started
        Path(stop_file).touch()
        comp.wait()
        table = DeltaTable(TABLE, storage_options=storage(endpoint))
        files = len(table.file_uris())
        read_started = time.monotonic()
        con = duckdb.connect()
        dataset = table.to_pyarrow_dataset()  # noqa: F841 (read by DuckDB by name)
        counts = con.execute(
            "SELECT writer, batch, count(*) FROM dataset GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        read_s = time.monotonic() - read_started
        expected = {(n, b) for n in names for b in range(1, args.batches + 1)}
        seen = {(w, b): c for w, b, c in counts}
        lost = sorted(expected - set(seen))
        doubled = sorted(k for k, c in seen.items() if c != args.rows)
        commits = args.writers * args.batches
        print(
            f"Delta on moto S3: {args.writers} writers × {args.batches} batches × {args.rows} rows,"
            f" {victim} killed once and started again; exit codes {codes}; {wall:.1f} s,"
            f" {commits / wall:.1f} commits/s; batches lost {len(lost)}, doubled or partial"
            f" {len(doubled)}; table version {table.version()}, {files} files after compaction;"
            f" whole table read through DuckDB in {read_s:.2f} s"
        )
    finally:
        moto.terminate()
        moto.wait()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        role, endpoint, *rest = sys.argv[2:]
        if role == "writer":
            writer(endpoint, rest[0], int(rest[1]), int(rest[2]))
        else:
            compactor(endpoint, rest[0])
    else:
        main()
