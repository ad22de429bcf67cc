"""The web UI in a real browser (headless Chromium, Debian's `chromium` and `chromium-driver`)
against `batchsched ui` on examples/ui/cluster.yaml: what a reader sees (docs/ui.md).

Skipped, saying why, where no browser is installed (`make test` installs it where it can).
BATCHSCHED_UI_SCREENSHOTS=DIR saves the screenshots docs/ui.md shows into DIR.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CLUSTER = ROOT / "examples" / "ui" / "cluster.yaml"
NOW = "2026-11-22T10:00:00Z"
LAPTOP = (1280, 900)
PHONE = (390, 844)

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip(
        f"no browser: {CHROMIUM} and {CHROMEDRIVER} are needed (Debian packages chromium and "
        "chromium-driver; `make test` installs them with apt-get where it can)",
        allow_module_level=True,
    )

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("snapshot") / "cluster.yaml"
    shutil.copy(CLUSTER, path)
    return path


@pytest.fixture(scope="module")
def server(snapshot: Path) -> Iterator[str]:
    """`batchsched ui` on a free port, its pages polled every half second."""
    command = [sys.executable, "-m", "batchsched", "ui", "-f", snapshot.name, "--now", NOW,
               "--port", "0", "--poll", "0.5"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=snapshot.parent)
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"serving (http://\S+?)/? ", line)
    try:
        assert found, f"batchsched ui did not start: {line}{process.stderr.read()}"
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_window_size(*LAPTOP)
    try:
        yield driver
    finally:
        driver.quit()


def shoot(browser: Any, name: str) -> None:
    """A screenshot for docs/ui.md, in 256 colours: small enough to keep in the repository."""
    folder = os.environ.get("BATCHSCHED_UI_SCREENSHOTS")
    if folder:
        from PIL import Image

        path = Path(folder) / f"{name}.png"
        browser.save_screenshot(str(path))
        Image.open(path).convert("RGB").quantize(256, method=2).save(path, optimize=True)


def text(browser: Any) -> str:
    return str(browser.find_element(By.TAG_NAME, "main").text)


def test_the_queue_tree(browser: Any, server: str) -> None:
    browser.get(server + "/")
    assert browser.title == "Queues · batchsched"
    cards = browser.find_elements(By.CSS_SELECTOR, "section.queue h2")
    assert [c.text for c in cards] == ["ops", "research", "nlp", "vision"]
    bars = [b.get_attribute("aria-label") for b in browser.find_elements(By.CSS_SELECTOR, ".bar")]
    assert "nvidia.com/gpu: 20 in use of nominal 16, guaranteed 8, limit 64" in bars
    shown = text(browser)
    assert (
        "5 pod(s) pending" in shown and "#1 in vision vision/pretrain (gang of 2, min 2)" in shown
    )
    assert "fair share" in shown and "not available" not in shown
    shoot(browser, "queues")


def test_a_pending_gangs_position_reason_and_expected_start(browser: Any, server: str) -> None:
    browser.get(server + "/queues/vision")
    browser.find_element(By.LINK_TEXT, "vision/pretrain").click()
    WebDriverWait(browser, 10).until(lambda b: b.title.startswith("Gang vision/pretrain"))
    facts = dict(
        zip(
            [e.text for e in browser.find_elements(By.CSS_SELECTOR, "dl.facts dt")],
            [e.text for e in browser.find_elements(By.CSS_SELECTOR, "dl.facts dd")],
            strict=True,
        )
    )
    assert facts["Position in its queue"] == "1 of 4 in vision"
    assert facts["Position overall"].startswith("5 waiting; the next queue is chosen by fair")
    # Backfill holds rack-1's nodes for it; its start waits on pods that state no runtime.
    assert facts["Expected start"].startswith("reserved gpu-1a, gpu-1b; waits for pods without")
    reason = browser.find_element(By.ID, "reason").text
    assert "topology example.com/rack: largest fit is rack-2 with 10 of 16 nvidia.com/gpu" in reason
    members = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert members == ["vision/pretrain-0 pending", "vision/pretrain-1 pending"]
    shoot(browser, "gang")


def test_the_gpu_map(browser: Any, server: str) -> None:
    browser.get(server + "/nodes")
    domains = browser.find_elements(By.CSS_SELECTOR, "section.domain h2")
    assert [d.text for d in domains] == ["rack-1 3 node(s), 4 free", "rack-2 3 node(s), 10 free"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "li.node")) == 6
    assert len(browser.find_elements(By.CSS_SELECTOR, "li.node .cell.used")) == 34
    gpu_2b = browser.find_element(By.CSS_SELECTOR, 'li.node[aria-label^="gpu-2b"]')
    label = (  # Backfill's, with when it holds which room there
        "gpu-2b: 2 of 8 nvidia.com/gpu in use, reserved for vision/sweep-1; vision/sweep-1 holds "
        "from now on, open (until the pods it waits for end and its holder starts): cpu 4, "
        "memory 32Gi, nvidia.com/gpu 8, pods 1"
    )
    assert gpu_2b.get_attribute("aria-label") == label
    assert len(browser.find_elements(By.CSS_SELECTOR, "li.node.reserved")) == 5
    shoot(browser, "nodes")


def test_pages_fit_a_phone(browser: Any, server: str) -> None:
    browser.set_window_size(*PHONE)
    try:
        for path in ("/", "/gangs/vision/pretrain", "/nodes"):
            browser.get(server + path)
            wide = browser.execute_script(
                "return document.documentElement.scrollWidth - window.innerWidth"
            )
            assert wide <= 0, f"{path} is {wide}px wider than a phone"
        browser.get(server + "/")
        shoot(browser, "phone")
    finally:
        browser.set_window_size(*LAPTOP)


def test_the_page_updates_in_place_when_the_snapshot_changes(
    browser: Any, server: str, snapshot: Path
) -> None:
    browser.get(server + "/queues/vision")
    assert "vision/sweep-3" not in text(browser)
    browser.execute_script("window.notReloaded = true")
    extra = CLUSTER.read_text().split("\n---\n")[-2].replace("sweep-2", "sweep-3")
    assert "name: sweep-3" in extra
    snapshot.write_text(snapshot.read_text() + "---\n" + extra + "\n")
    started = time.monotonic()
    WebDriverWait(browser, 15).until(lambda b: "vision/sweep-3" in text(b))
    assert time.monotonic() - started < 15
    assert browser.execute_script("return window.notReloaded === true")  # no reload
    assert "Pending workloads, in the order they are tried (5)" in text(browser)
    assert "updated" in browser.find_element(By.ID, "live").text
