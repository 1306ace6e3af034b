"""The chart renderers' worker processes (warehouse/charts/render.py): started without
re-running the main script, whose module level can be a CLI's or a benchmark's imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
from pathlib import Path

if __name__ != "__main__":  # a spawned worker re-running this script
    raise SystemExit("the main script was run again in a worker")

from needlescope.warehouse.charts import render, vega

spec = {"data": {"values": [{"x": 1, "y": 2}]}, "mark": "point",
        "encoding": {"x": {"field": "x", "type": "quantitative"},
                     "y": {"field": "y", "type": "quantitative"}}}
main = sys.modules["__main__"]
with render.renderers(2) as pool:
    for job in render.start(pool, vega.vl_version()):
        job.result()
    assert main.__spec__ is None  # put back as it was
    pool.submit(render.save_spec, spec, Path(sys.argv[1]) / "chart", vega.vl_version()).result()
print("drawn")
"""


def test_workers_draw_without_running_the_main_script_again(tmp_path: Path) -> None:
    script = tmp_path / "draw.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "drawn"
    assert (tmp_path / "chart.svg").read_text(encoding="utf-8").startswith("<svg")
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"
