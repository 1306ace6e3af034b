"""Open a page in headless Chromium and report what drew, over the DevTools protocol.

The browser is the system's Chromium (Debian's ``chromium`` package, or $NEEDLESCOPE_CHROMIUM);
nothing is downloaded. It runs with a throwaway profile and its background networking off,
and is driven through a websocket with aiohttp: console errors, uncaught exceptions, every
request the page makes, and a description of each chart container are collected.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--metrics-recording-only",
    "--no-first-run",
    "--no-default-browser-check",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
    "--hide-scrollbars",
    "--window-size=1400,1000",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)

# One entry per chart container: did vega-embed finish, and what did it draw?
DESCRIBE = r"""
Array.from(document.querySelectorAll(%(selector)s)).map((el) => ({
  id: el.id,
  rendered: el.dataset.rendered || null,
  svg: el.querySelectorAll('svg').length,
  canvas: el.querySelectorAll('canvas').length,
  marks: el.querySelectorAll('svg g.role-mark > *').length,
  // Labels that say a field was missing or a number was not one.
  junk: Array.from(el.querySelectorAll('svg text'))
    .map((t) => t.textContent)
    .filter((t) => /\b(undefined|NaN|Infinity)\b/.test(t)),
  text: (el.textContent || '').slice(0, 300),
}))
"""


def find_chromium() -> str | None:
    explicit = os.environ.get("NEEDLESCOPE_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else shutil.which(explicit)
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


def require_chromium() -> str:
    """The Chromium to drive; `make test` installs Debian's, so its absence is a failure."""
    found = find_chromium()
    assert found is not None, "needs Chromium: run `make browser` (apt-get install chromium)"
    return found


@dataclass
class PageReport:
    url: str
    ready: bool = False
    charts: list[dict[str, Any]] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    console_warnings: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def problems(self, expected: Sequence[str] = ()) -> list[str]:
        """Everything wrong with the page's charts, one readable line each ([] = all good)."""
        found = []
        if not self.ready:
            found.append("the page never reported that its charts were done")
        found += [f"console error: {e}" for e in self.console_errors]
        found += [f"uncaught exception: {e}" for e in self.exceptions]
        found += [
            f"request that leaves the page: {url}"
            for url in self.requests
            if not url.startswith(("file:", "data:", "about:", "blob:"))
        ]
        ids = {chart["id"] for chart in self.charts}
        found += [f"chart {name}: no container" for name in expected if name not in ids]
        if not self.charts:
            found.append("no chart container on the page")
        for chart in self.charts:
            name = chart["id"]
            if chart["rendered"] != "ok":
                found.append(f"chart {name}: rendered={chart['rendered']} {chart['text']!r}")
            if not chart["svg"] and not chart["canvas"]:
                found.append(f"chart {name}: no <svg> or <canvas>")
            elif chart["svg"] and not chart["marks"]:
                found.append(f"chart {name}: an <svg> without any mark")
            if chart["junk"]:
                found.append(f"chart {name}: labels {chart['junk'][:5]}")
        return found


class _DevTools:
    """A minimal Chrome DevTools protocol client over one page's websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.loaded = asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = message.json()
            if "id" in data:
                future = self.waiting.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
            else:
                self.events.append(data)
                if data.get("method") == "Page.loadEventFired":
                    self.loaded.set()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[ident] = future
        await self.ws.send_json({"id": ident, "method": method, "params": params})
        reply = await asyncio.wait_for(future, 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def close(self) -> None:
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader


def _console_text(params: dict[str, Any]) -> str:
    parts = []
    for arg in params.get("args", []):
        value = arg.get("value", arg.get("description", arg.get("type")))
        parts.append(str(value))
    return " ".join(parts)


def _collect(report: PageReport, events: list[dict[str, Any]]) -> None:
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            if params.get("type") in ("error", "assert"):
                report.console_errors.append(_console_text(params))
            elif params.get("type") == "warning":
                report.console_warnings.append(_console_text(params))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            exception = details.get("exception", {})
            report.exceptions.append(str(exception.get("description") or details.get("text")))
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            if entry.get("level") == "error":
                report.console_errors.append(f"{entry.get('source')}: {entry.get('text')}")
        elif method == "Network.requestWillBeSent":
            report.requests.append(params.get("request", {}).get("url", ""))


async def _wait_for_port(profile: Path, process: subprocess.Popen[bytes], timeout_s: float) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode}")
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(marker.read_text().splitlines()[0])
        await asyncio.sleep(0.05)
    raise TimeoutError("chromium did not open its DevTools port")


async def inspect_page_async(
    url: str,
    *,
    selector: str = ".vega",
    ready: str = "document.body && document.body.dataset.charts === 'done'",
    timeout_s: float = 60,
    chromium: str | None = None,
    screenshot: Path | None = None,
) -> PageReport:
    """Load ``url``, wait until ``ready`` is true, describe every ``selector`` element.

    ``screenshot``: also save a PNG of the whole page there (to look at a failure).
    """
    async with _loaded_page(url, selector, ready, timeout_s, chromium) as (tools, report):
        if screenshot is not None:
            shot = await tools.send(
                "Page.captureScreenshot", format="png", captureBeyondViewport=True
            )
            Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
    _collect(report, tools.events)
    return report


@contextlib.asynccontextmanager
async def _loaded_page(
    url: str, selector: str, ready: str, timeout_s: float, chromium: str | None
) -> AsyncIterator[tuple[_DevTools, PageReport]]:
    """A headless Chromium of its own with ``url`` loaded and driven until ``ready``; the
    browser and its DevTools connection end with the block."""
    binary = chromium or find_chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium)")
    report = PageReport(url)
    with tempfile.TemporaryDirectory(
        prefix="needlescope-chromium-", ignore_cleanup_errors=True
    ) as tmp:
        profile = Path(tmp)
        with (profile / "chromium.log").open("wb") as log:
            process = subprocess.Popen(
                [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its helpers share this group: all end with it
            )
        try:
            port = await _wait_for_port(profile, process, timeout_s)
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/json/list") as reply:
                    targets = await reply.json()
                page = next(t for t in targets if t.get("type") == "page")
                async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                    tools = _DevTools(ws)
                    try:
                        await _drive(tools, report, url, selector, ready, timeout_s)
                        yield tools, report
                    finally:
                        await tools.close()
        finally:
            _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the Chromium we started and the helper processes in its session."""
    group = process.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        process.poll()
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    process.wait()


async def _drive(
    tools: _DevTools, report: PageReport, url: str, selector: str, ready: str, timeout_s: float
) -> None:
    for domain in ("Runtime", "Log", "Network", "Page"):
        await tools.send(f"{domain}.enable")
    await tools.send("Page.navigate", url=url)
    await asyncio.wait_for(tools.loaded.wait(), timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await tools.evaluate(f"Boolean({ready})"):
            report.ready = True
            break
        if any(e.get("method") == "Runtime.exceptionThrown" for e in tools.events):
            break  # an uncaught exception: the page will not get ready, fail fast
        await asyncio.sleep(0.1)
    report.charts = list(await tools.evaluate(DESCRIBE % {"selector": json.dumps(selector)}))


def inspect_page(url: str, **options: Any) -> PageReport:
    return asyncio.run(inspect_page_async(url, **options))


def inspect_file(path: Path, **options: Any) -> PageReport:
    return inspect_page(Path(path).resolve().as_uri(), **options)


# ----------------------------------------------------------------------------- interaction

# (selector, index) => the element's centre in the viewport, after scrolling it into view,
# with the datum Vega bound to it (a mark's data row), or null when there is no such element.
_CENTRE = """(selector, index) => {
  const el = document.querySelectorAll(selector)[index];
  if (!el) return null;
  el.scrollIntoView({block: 'center', inline: 'center'});
  const box = el.getBoundingClientRect();
  const item = el.__data__;
  return {x: box.left + box.width / 2, y: box.top + box.height / 2,
          width: box.width, height: box.height,
          datum: item && item.datum ? JSON.parse(JSON.stringify(item.datum)) : null};
}"""

# (selector, value) => choose value in the <select> and fire "change"; false if impossible.
_SELECT = """(selector, value) => {
  const el = document.querySelector(selector);
  if (!el || !Array.from(el.options).some((o) => o.value === value)) return false;
  el.value = value;
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return true;
}"""


class PageSession:
    """A page loaded in headless Chromium whose charts drew: act on it, then read the report.

    Clicks are real mouse events at a point of the viewport (DevTools ``Input``), so they
    reach an SVG mark the way a reader's click does (Vega picks the item under the pointer).
    """

    def __init__(self, tools: _DevTools, report: PageReport) -> None:
        self._tools = tools
        self._report = report

    async def evaluate(self, expression: str) -> Any:
        return await self._tools.evaluate(expression)

    async def wait_for(self, expression: str, timeout_s: float = 10) -> bool:
        """Poll ``expression`` until it is truthy; False after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if await self._tools.evaluate(f"Boolean({expression})"):
                return True
            await asyncio.sleep(0.05)
        return False

    async def click_at(self, x: float, y: float) -> None:
        """A left click at viewport point (x, y), in CSS pixels."""
        await self._tools.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            await self._tools.send(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )

    async def click(self, selector: str, index: int = 0) -> dict[str, Any]:
        """Scroll the ``index``-th element matching ``selector`` into view and click its
        centre. Returns its box and, for a Vega mark, the datum Vega bound to it."""
        found = await self._tools.evaluate(f"({_CENTRE})({json.dumps(selector)}, {int(index)})")
        if found is None:
            raise LookupError(f"no element {selector!r} #{index}")
        await self.click_at(found["x"], found["y"])
        return dict(found)

    async def select(self, selector: str, value: str) -> None:
        """Choose ``value`` in a <select> and fire its change event, as a reader would."""
        done = await self._tools.evaluate(
            f"({_SELECT})({json.dumps(selector)}, {json.dumps(value)})"
        )
        if not done:
            raise LookupError(f"no option {value!r} in {selector!r}")

    def report(self) -> PageReport:
        """The page's report so far: console errors, exceptions and requests included."""
        report = PageReport(self._report.url, self._report.ready, list(self._report.charts))
        _collect(report, self._tools.events)
        return report


@contextlib.asynccontextmanager
async def open_page(
    url: str,
    *,
    selector: str = ".vega",
    ready: str = "document.body && document.body.dataset.charts === 'done'",
    timeout_s: float = 60,
    chromium: str | None = None,
) -> AsyncIterator[PageSession]:
    """Load ``url`` as :func:`inspect_page_async` does, then hand the live page over."""
    async with _loaded_page(url, selector, ready, timeout_s, chromium) as (tools, report):
        yield PageSession(tools, report)
