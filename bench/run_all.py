"""Run every bench/bench_*.py in turn; each prints its own figures, and the lines starting
with TARGET (a target's figure, its goal and its baseline) are printed again together at the
end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
# Scripts run more than once: each list is one run's arguments. The warehouse at 10M answers
# is generated once (~6 min) and cached under bench/.cache/ (git-ignored).
RUNS: dict[str, list[list[str]]] = {
    "bench_warehouse.py": [[], ["--layout", "year", "--epochs", "500"]],
    "bench_orchestration.py": [[], ["scale"]],
}


def main() -> int:
    failed = 0
    targets: list[str] = []
    runs = [
        (script, args)
        for script in sorted(HERE.glob("bench_*.py"))
        for args in RUNS.get(script.name, [[]])
    ]
    for script, args in runs:
        print(f"\n== {' '.join([script.name, *args])}", flush=True)
        with subprocess.Popen(
            [sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True
        ) as child:
            assert child.stdout is not None
            for line in child.stdout:
                print(line, end="", flush=True)
                if line.startswith("TARGET "):
                    targets.append(f"{script.name}: {line[len('TARGET ') :].rstrip()}")
        failed += child.returncode != 0
    print("\n== targets (figure | goal | baseline)")
    print("\n".join(targets) or "none measured")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
