"""The status page in a real browser: Debian's headless chromium, driven by Playwright, against a real
3-node cluster of `rmqc serve` processes and a simulated broker fleet (rmqc.brokersim) in a thread of
this process. The page shows the master of a group; that master is killed (its connections close,
its heartbeats stop); the page then shows the new master and the failover.

A second test serves 10,000 groups from an in-process node and pages, sorts, searches and filters
them in the browser.

The screenshot is saved under the test's tmp_path (the test prints where); docs/img/status-page.png
is one of these. Bounds: FLEET_CONVERGE_S for brokers registered with full SyncStateSets on a shared
machine (4 groups took ~5 s), PAGE_S for what the page must show after it happened (it refreshes
every second).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from page_helpers import fill, start_node

from rmqc.brokersim import BrokerFleet, SimTiming
from rmqc.cli.dev import LocalCluster
from rmqc.launcher import consecutive_free_ports
from rmqc.node._exporter import start_metrics_exporter
from rmqc.node._status_page import StatusPage

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright is in the dev extra (make install)")

CHROMIUM = "/usr/bin/chromium"
# What this machine's chromium needs to start headless in a container, quietly and offline.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
GROUPS = 4
FLEET_CONVERGE_S = 60.0
SERVE_START_S = FLEET_CONVERGE_S + 30
BIG_GROUPS = 10_000
PAGE_S = 20.0
VICTIM = "broker-0001"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason=f"no {CHROMIUM}: scripts/install-test-deps.sh installs Debian's chromium")


class TrioThread:
    """`serve` (started as a Trio task: it calls task_status.started(value)) in its own thread's
    Trio loop, so that the page's browser can block this thread meanwhile; `call` runs a function in
    that loop, `value` is what `serve` started with."""

    def __init__(self, serve: Callable[..., Awaitable[None]], *args: Any) -> None:
        self._serve, self._args = serve, args
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self.value: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="trio-thread", daemon=True)

    def __enter__(self) -> TrioThread:
        self._thread.start()
        if not self._ready.wait(SERVE_START_S) or self.error is not None:
            raise AssertionError(f"{self._serve.__name__} did not start within {SERVE_START_S} s: {self.error!r}")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None and self._stop is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(timeout=30)

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return trio.from_thread.run_sync(function, *args, trio_token=self._token)

    def _main(self) -> None:
        try:
            trio.run(self._run)
        except BaseException as error:  # reported to the test by __enter__
            self.error = error
            self._ready.set()

    async def _run(self) -> None:
        self._token, self._stop = trio.lowlevel.current_trio_token(), trio.Event()
        async with trio.open_nursery() as nursery:
            self.value = await nursery.start(self._serve, *self._args)
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()


async def serve_fleet(controllers: list[str], state_dir: Path, *, task_status: Any) -> None:
    async with BrokerFleet(controllers, groups=GROUPS, replicas=3, state_dir=state_dir,
                           timing=SimTiming.fast(), seed=20261127) as fleet:
        await fleet.wait_converged(FLEET_CONVERGE_S, full_sync_state_sets=True)
        task_status.started(fleet)
        await trio.sleep_forever()


async def serve_big_node(data_dir: Path, *, task_status: Any) -> None:
    """An in-process node holding BIG_GROUPS groups of 3 brokers, its status page on a metrics port."""
    async with trio.open_nursery() as nursery:
        node = await start_node(nursery, data_dir)
        await fill(node, BIG_GROUPS)
        page = StatusPage(node)
        nursery.start_soon(page.run)
        exporter = start_metrics_exporter(node.node_metrics, 0, status_page=page)
        try:
            task_status.started(exporter.port)
            await trio.sleep_forever()
        finally:
            exporter.close()


@contextmanager
def plain_asyncio_loops() -> Iterator[None]:
    """Playwright's sync API runs its own asyncio loop. Once another test imported trio_asyncio (the
    asyncio client's tests do), its policy makes every new loop a Trio-backed one, and Playwright's
    calls then nest inside it: the browser failed, and the Trio run it left behind failed every
    later test of the session ("Attempted to call run() from inside a run()"). The browser gets a
    plain loop; the policy is put back after."""
    policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(policy)


@contextmanager
def browser_page() -> Iterator[Any]:
    """A page of a fresh headless Debian chromium (its own profile directory, removed after)."""
    profile = tempfile.mkdtemp(prefix="rmqc-chromium-")
    try:
        with plain_asyncio_loops(), playwright_api.sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
                viewport={"width": 1400, "height": 1000})
            try:
                yield context.new_page()
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_page_shows_a_killed_master_replaced(tmp_path: Path) -> None:
    metrics_base = consecutive_free_ports(3)
    with LocalCluster(3, data_dir=tmp_path / "cluster", metrics_base_port=metrics_base) as cluster:
        cluster.wait_for_leader()
        with TrioThread(serve_fleet, cluster.addresses, tmp_path / "sim") as fleet_thread, browser_page() as page:
            fleet = fleet_thread.value
            # node n0's page, whatever its role: every node shows every member and applied every failover
            page.goto(f"http://127.0.0.1:{metrics_base}/")
            expect = playwright_api.expect
            expect(page.locator("#refresh")).to_have_text("live", timeout=PAGE_S * 1000)
            expect(page.locator("#nodes tbody tr")).to_have_count(3, timeout=PAGE_S * 1000)
            expect(page.locator('#nodes tbody tr[data-role="leader"]')).to_have_count(1, timeout=PAGE_S * 1000)

            old_master = fleet_thread.call(fleet.master_of, VICTIM)
            assert old_master is not None
            row = page.locator(f'#groups tbody tr[data-group="{VICTIM}"]')
            expect(row).to_have_attribute("data-master", str(old_master), timeout=PAGE_S * 1000)
            page.fill("#group-search", VICTIM)  # the search narrows the table to the one group
            expect(page.locator("#groups tbody tr")).to_have_count(1)
            expect(page.locator("#group-count")).to_have_text(f"(1 of {GROUPS})")

            fleet_thread.call(fleet.kill, VICTIM, old_master)
            expect(row).not_to_have_attribute("data-master", str(old_master), timeout=PAGE_S * 1000)
            expect(row).not_to_have_attribute("data-master", "", timeout=PAGE_S * 1000)
            new_master = int(row.get_attribute("data-master") or "0")
            assert new_master != old_master and new_master in {b.broker_id for b in fleet.group(VICTIM)}
            failover = page.locator(f'#failovers tbody tr[data-group="{VICTIM}"]').first
            expect(failover).to_contain_text(f"{old_master} ", timeout=PAGE_S * 1000)
            cells = failover.locator("td")
            assert cells.nth(2).inner_text().startswith(f"{old_master} ")  # old master
            assert cells.nth(3).inner_text().startswith(f"{new_master} ")  # new master
            assert cells.nth(5).inner_text() == "controller"  # the leader saw the master's connection close
            expect(page.locator("#timeline rect")).not_to_have_count(0)

            page.fill("#group-search", "")
            expect(page.locator("#groups tbody tr")).to_have_count(GROUPS)
            screenshot = tmp_path / "status-page.png"
            page.screenshot(path=str(screenshot), full_page=True)
            print(f"status page screenshot: {screenshot}")
            assert screenshot.stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_10000_groups_are_searched_and_paged_in_the_browser(tmp_path: Path) -> None:
    with TrioThread(serve_big_node, tmp_path) as node_thread, browser_page() as page:
        page.goto(f"http://127.0.0.1:{node_thread.value}/")
        expect = playwright_api.expect
        expect(page.locator("#group-count")).to_have_text(f"({BIG_GROUPS} of {BIG_GROUPS})", timeout=PAGE_S * 1000)
        expect(page.locator("#groups tbody tr")).to_have_count(50)  # one page drawn, not 10,000 rows
        # the page writes an en dash between the row numbers
        expect(page.locator("#page-info")).to_have_text(f"1–50 of {BIG_GROUPS}, page 1/{BIG_GROUPS // 50}")  # noqa: RUF001
        page.click("#page-next")
        expect(page.locator("#groups tbody tr").first).to_have_attribute("data-group", "broker-1042")  # sorted by name
        started = page.evaluate("performance.now()")
        page.fill("#group-search", "broker-9999")
        expect(page.locator("#groups tbody tr")).to_have_count(1)
        search_ms = page.evaluate("performance.now()") - started
        expect(page.locator("#groups tbody tr")).to_have_attribute("data-group", "broker-9999")
        page.fill("#group-search", "10.39.249.")  # a broker address: the 3 brokers of group 9999
        expect(page.locator("#group-count")).to_have_text(f"(1 of {BIG_GROUPS})")
        page.fill("#group-search", "")
        page.select_option("#group-filter", "no-master")
        expect(page.locator("#page-info")).to_have_text("no group matches")
        print(f"{BIG_GROUPS} groups: a search drawn in {search_ms:.0f} ms")
