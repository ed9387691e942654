"""A real browser: JupyterLab + headless Chromium (Debian's) driven by Playwright.

Opens notebook 07 (the comparison board), runs all cells, checks that the DAG and Gantt plots
render, changes a control (the method of the second Gantt chart) and checks that the figure
updates, and saves screenshots under the test's tmp folder. The server is stopped by its PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "07_compare_board.ipynb"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"{CHROMIUM} missing (run `make browser-deps`)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 90.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"JupyterLab did not answer on {url}:\n{log.read_text()[-3000:]}")


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on a free port, token disabled, in an isolated folder."""
    pytest.importorskip("playwright.sync_api")
    work = tmp_path / "lab"
    work.mkdir()
    shutil.copy(NOTEBOOK, work / NOTEBOOK.name)
    port = _free_port()
    env = dict(os.environ)
    for var, sub in (("JUPYTER_CONFIG_DIR", "cfg"), ("JUPYTER_RUNTIME_DIR", "rt"),
                     ("JUPYTERLAB_WORKSPACES_DIR", "ws"), ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                     ("IPYTHONDIR", "ipy")):
        env[var] = str(tmp_path / sub)
    # render every cell (no windowing, so off-screen outputs stay in the DOM); no news fetch
    settings = tmp_path / "settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        '{"windowingMode": "none"}')
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", "--ServerApp.port_retries=0", "--ServerApp.token=",
           "--ServerApp.password=", f"--ServerApp.root_dir={work}",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = tmp_path / "jupyterlab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work,
                                start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/api/status", proc, log)
        yield {"url": f"http://127.0.0.1:{port}", "dir": work, "out": tmp_path, "log": log}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        # kernels started by this server run in its session (process group = its PID)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _gantt_title(page, cls: str) -> str:
    return page.locator(f".{cls} .gtitle").first.text_content() or ""


def test_notebook_07_in_jupyterlab(lab):
    from playwright.sync_api import expect, sync_playwright

    out = lab["out"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(60_000)
            page.goto(f"{lab['url']}/lab/tree/{NOTEBOOK.name}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", state="attached")
            page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]',
                                   state="attached", timeout=90_000)
            import nbformat

            n_code = sum(c.cell_type == "code" for c in nbformat.read(NOTEBOOK, 4).cells)
            expect(page.locator(".jp-Notebook .jp-CodeCell")).to_have_count(n_code)
            expect(page.locator(".jp-StatusBar-Widget", has_text="| Idle").first).to_be_visible(
                timeout=90_000)
            # run all cells: the toolbar's "restart the kernel and run all cells", confirmed
            page.locator('.jp-NotebookPanel-toolbar [data-command="notebook:restart-run-all"]'
                         ).first.click()
            page.locator(".jp-Dialog .jp-mod-accept").first.click()
            # every code cell gets an execution count, none stays busy
            t0 = time.time()
            while True:
                prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
                done = [t for t in prompts if t.strip()[:1] == "[" and t.strip()[1:2].isdigit()]
                if len(done) == n_code:
                    break
                errors = page.locator(".jp-OutputArea-output[data-mime-type="
                                      "'application/vnd.jupyter.stderr']").count()
                if time.time() - t0 > 180:
                    page.screenshot(path=str(out / "timeout.png"), full_page=True)
                    raise AssertionError(f"cells did not finish: prompts {prompts}, "
                                         f"{errors} stderr outputs")
                time.sleep(1)
            tracebacks = page.locator(".jp-RenderedText[data-mime-type="
                                      "'application/vnd.jupyter.stderr'] >> text=Traceback")
            assert tracebacks.count() == 0, tracebacks.first.inner_text()

            # the DAG renders: plotly drew its nodes
            dag = page.locator(".wb-dag.js-plotly-plot").first
            try:
                expect(dag).to_be_visible(timeout=60_000)
            except AssertionError:
                page.screenshot(path=str(out / "no_dag.png"), full_page=True)
                (out / "dom.html").write_text(page.content())
                raise
            assert page.locator(".wb-dag .scatterlayer .trace .point").count() > 50
            # the Gantts render: bars for ops, a title naming the method
            for cls in ("wb-gantt-a", "wb-gantt-b"):
                expect(page.locator(f".{cls}.js-plotly-plot").first).to_be_visible()
                assert page.locator(f".{cls} .barlayer .point").count() > 20
            # the comparison bars render
            assert page.locator(".wb-compare .barlayer .point").count() >= 3
            page.locator(".wb-gantt-a").first.scroll_into_view_if_needed()
            page.screenshot(path=str(out / "notebook07_before.png"), full_page=True)

            # change a control: the method of Gantt B; its figure must redraw
            select = page.locator(".wb-gantt-b-picker select").first
            options = select.locator("option").all_inner_texts()
            before = _gantt_title(page, "wb-gantt-b")
            target = next(o for o in options if not before.startswith(o + " "))
            select.select_option(label=target)
            expect(page.locator(".wb-gantt-b .gtitle").first).to_contain_text(
                target + " on ", timeout=30_000)
            after = _gantt_title(page, "wb-gantt-b")
            assert after != before and after.startswith(target)
            page.locator(".wb-gantt-b").first.scroll_into_view_if_needed()
            page.screenshot(path=str(out / "notebook07_after.png"))
            # linked selection in the browser: click a DAG node, the Gantt outlines that op
            lone = page.locator(".wb-gantt:not(.wb-gantt-a):not(.wb-gantt-b)").first
            bars = lone.locator(".barlayer .point")
            n_bars = bars.count()  # the empty "selected" trace draws nothing yet
            node = dag.locator(".scatterlayer .trace").nth(2).locator(".point").nth(3)
            node.scroll_into_view_if_needed()
            box = node.bounding_box()
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            expect(bars).to_have_count(n_bars + 1, timeout=30_000)
            lone.screenshot(path=str(out / "gantt_selected.png"))
            page.locator(".wb-gantt-b").first.screenshot(path=str(out / "gantt_b.png"))
            page.locator(".wb-compare").first.screenshot(path=str(out / "compare.png"))
            page.locator(".wb-dag").first.screenshot(path=str(out / "dag.png"))
        finally:
            browser.close()
    assert (out / "notebook07_after.png").stat().st_size > 10_000
