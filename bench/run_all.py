"""Run every bench/bench_*.py in turn; each prints its own figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n== {script.name}", flush=True)
        failed += subprocess.run([sys.executable, str(script)], check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
