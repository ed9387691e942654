"""A real browser: JupyterLab + headless Chromium (Debian's) driven by Playwright.

Opens every notebook of ``notebooks/`` (those later issues add too) in one JupyterLab server,
runs all cells, checks what ``tests/notebooks/test_notebooks.py`` checks of a run (no error, no TensorFlow
log, within the time budget, the notebook's effect in :data:`EFFECTS`: the effect cell is
appended to the server's copy; where this test runs, that module's nbclient run is skipped, so
each notebook executes once: see the root ``conftest.py``), checks that every figure renders (each plotly plot has a drawn, non-empty SVG),
changes one control per notebook that has one (see ``CONTROLS``; a notebook without an entry
is still run and its figures checked) and checks that its figure redraws, and saves a
screenshot per notebook under
``reports/browser/`` (a CI artefact). Notebook 07 (the comparison board) is also checked in
detail: Gantt pickers and linked selection. The server is stopped by its PID; each notebook's
kernel is shut down before the next opens. JupyterLab loads once per worker: each notebook
opens in the same page (``window.jupyterapp``), on a kernel started for it, after the last one
is closed (a reload per notebook cost about 6 s of chromium's CPU; after a failed test the page
is loaded again).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from workbench.testing.process import default_signals
from workbench.testing.timing import slowdown

_spec = importlib.util.spec_from_file_location(
    "_notebook_checks", Path(__file__).with_name("test_notebooks.py"))
NB = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(NB)  # EFFECTS, effect_cell, the budget and the TensorFlow log words

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NOTEBOOK = ROOT / "notebooks" / "07_compare_board.ipynb"
SHOTS = ROOT / "reports" / "browser"
# notebook -> (control kind, control selector, selector of the figure it redraws, min. plots);
# kind None: a notebook of plain figures, no control to change
CONTROLS = {
    "01": ("select", ".wb-color-by select", ".wb-dag", 5),
    "02": ("select", ".wb-color-by select", ".wb-dag", 5),
    "03": ("select", ".wb-color-by select", ".wb-dag", 5),
    "04": ("slider", ".wb-coarse-target", ".wb-coarse", 4),
    "05": ("select", ".wb-pipeline-picker select", ".wb-pipeline", 4),
    "06": ("click", ".wb-heatmap", ".wb-slice", 5),  # a heatmap cell drills down
    "07": ("select", ".wb-gantt-b-picker select", ".wb-gantt-b", 6),
    "08": ("checkbox", ".wb-idle input", ".wb-gantt", 2),
    "09": (None, None, None, 4),  # sweeps: profile, win/tie/loss and two parameter curves
    "11": (None, None, None, 5),  # bars with error bars, two robustness views, diff, progress
}
NO_CONTROL = (None, None, None, 0)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.notebook,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"{CHROMIUM} missing (run `make browser-deps`)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _load_ms(seconds: float) -> int:
    """A Playwright wait of ``seconds``, in ms, grown with the machine's load (issue 41)."""
    return int(seconds * 1000 * slowdown())


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 90.0) -> None:
    timeout *= slowdown()  # the server starts slower on a loaded machine
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


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free port, token disabled, in an isolated folder holding
    copies of the notebooks."""
    pytest.importorskip("playwright.sync_api")
    tmp_path = tmp_path_factory.mktemp("browser")
    work = tmp_path / "lab"
    work.mkdir()
    for nb in NOTEBOOKS:
        NB.with_effect_cell(nb, work / nb.name)
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
           "--ServerApp.disable_check_xsrf=True",  # lets the test shut kernels down by REST
           "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: open and close notebooks
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = tmp_path / "jupyterlab.log"
    with open(log, "w") as out:  # the server and its kernels as from a terminal (Ctrl-C works)
        proc = subprocess.Popen(default_signals(cmd), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work,
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
    t = page.locator(f".{cls} .gtitle").first.text_content() or ""
    return t.lstrip("■ ").strip()  # the method's colour swatch comes first


def _shutdown_kernels(url: str) -> None:
    with urllib.request.urlopen(f"{url}/api/sessions", timeout=10) as r:
        sessions = json.loads(r.read())
    for s in sessions:
        req = urllib.request.Request(f"{url}/api/sessions/{s['id']}", method="DELETE")
        urllib.request.urlopen(req, timeout=20).close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def tab(lab, browser):
    """One page holding JupyterLab for every notebook of this worker: JupyterLab loads once
    (about 6 s of chromium's CPU a load) and each test opens its notebook in it, closing the
    last one's. A test that fails closes the page; the next one loads JupyterLab again."""
    holder = {"page": None}
    yield holder
    if holder["page"] is not None:
        holder["page"].close()


def _lab_page(tab, browser, lab):
    """The worker's JupyterLab page, loaded on a fresh workspace when there is none."""
    from playwright.sync_api import expect

    if tab["page"] is None:
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.set_default_timeout(_load_ms(60))
        page.goto(f"{lab['url']}/lab?reset")  # a fresh workspace
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell",
                               timeout=_load_ms(90))
        expect(page.locator(".jp-LabShell")).to_be_attached()
        tab["page"] = page
    return tab["page"]


def _close_notebooks(page) -> None:
    """Close every document of the main area without a save dialog (the server's copies are
    throw-away); the kernels are shut down by REST."""
    page.evaluate("""() => { const app = window.jupyterapp;
        for (const w of Array.from(app.shell.widgets('main'))) w.dispose(); }""")


def _run_all(page, lab, name: str, out: Path) -> int:
    """Open ``name`` (the only document open) on a fresh kernel and run all cells; return the
    number of code cells."""
    import nbformat
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    _close_notebooks(page)
    page.evaluate("(name) => window.jupyterapp.commands.execute('docmanager:open', "
                  "{path: name})", name)
    page.wait_for_selector(".jp-Notebook .jp-Cell", state="attached")
    page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]',
                           state="attached", timeout=_load_ms(90))
    n_code = sum(c.cell_type == "code" for c in nbformat.read(lab["dir"] / name, 4).cells)
    expect(page.locator(".jp-Notebook .jp-CodeCell")).to_have_count(n_code)
    expect(page.locator(".jp-StatusBar-Widget", has_text="| Idle").first).to_be_visible(
        timeout=_load_ms(90))
    # run all cells on the kernel the notebook opened with (started for it, so fresh)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    load = slowdown()  # bounds grow with the machine's load (issue 41)
    t0 = time.time()
    try:  # every code cell gets an execution count, none stays busy (polled in the page)
        page.wait_for_function(
            """(n) => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
                 .filter(p => /^\\[\\d/.test(p.innerText.trim())).length === n""",
            arg=n_code, polling=250, timeout=240_000 * load)
    except PlaywrightTimeout:
        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
        page.screenshot(path=str(out / f"timeout-{name}.png"), full_page=True)
        raise AssertionError(f"{name}: cells did not finish: prompts {prompts}") from None
    elapsed = time.time() - t0
    tracebacks = page.locator(".jp-RenderedText[data-mime-type="
                              "'application/vnd.jupyter.stderr'] >> text=Traceback")
    assert tracebacks.count() == 0, tracebacks.first.inner_text()
    # what tests/notebooks/test_notebooks.py checks of a run: within budget, no TensorFlow log, its effect
    # load-scaled as in tests/notebooks/test_notebooks.py: notebook 08 took 139 s at a load of 7
    assert elapsed < NB.BUDGET_S * NB.SLACK * max(load, slowdown()), \
        f"{name} took {elapsed:.0f} s (slowdown {load:.1f})"
    stderr = "".join(page.locator(".jp-RenderedText[data-mime-type="
                                  "'application/vnd.jupyter.stderr']").all_inner_texts())
    NB.check_stderr(name, stderr)
    if name[:2] in NB.EFFECTS:
        last = page.locator(".jp-Notebook .jp-CodeCell").last
        NB.check_effect(name, "".join(last.locator(".jp-OutputArea-output").all_inner_texts()))
    return n_code


# each plot of the notebook scrolled into view: [drawing width, height, drawn marks, box width]
_SIZES = """() => Array.from(document.querySelectorAll('.jp-OutputArea .js-plotly-plot'))
    .map(f => { f.scrollIntoView(); const s = f.querySelector('.main-svg');
        const b = s ? s.getBoundingClientRect() : {width: 0, height: 0};
        return [b.width, b.height,
                f.querySelectorAll('.trace, .point, .hm, .imagelayer image').length,
                f.getBoundingClientRect().width]; })"""
# what a figure shows: its title, its drawn points and its legend (to detect a redraw)
_STATE = """(sel) => { const f = document.querySelector(sel + '.js-plotly-plot')
                      || document.querySelector(sel + ' .js-plotly-plot');
             if (!f) return '';
             const t = f.querySelector('.gtitle'); const pts = f.querySelectorAll('.point');
             const vis = Array.from(pts).filter(p => p.getBBox && p.getBBox().width > 0).length;
             return (t ? t.textContent : '') + '|' + pts.length + '|' + vis + '|' +
                    Array.from(f.querySelectorAll('.legendtext')).map(x => x.textContent).join(',')
                    + '|' + Array.from(f.querySelectorAll('.point path, path.point'))
                      .slice(0, 40).map(p => p.getAttribute('d') + p.getAttribute('style'))
                      .join(''); }"""


def _figure_state(page, sel: str) -> str:
    """What a figure shows (:data:`_STATE`): title, drawn points, legend."""
    return page.evaluate(_STATE, sel)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_in_jupyterlab(lab, browser, tab, path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    out = lab["out"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    kind, control, figure, min_plots = CONTROLS.get(path.name[:2], NO_CONTROL)
    page = _lab_page(tab, browser, lab)
    ok = False
    try:
        _run_all(page, lab, path.name, out)
        # every figure renders: plotly drew an SVG of a real size with something in it
        plots = page.locator(".jp-OutputArea .js-plotly-plot")
        if min_plots:
            expect(plots.nth(min_plots - 1)).to_be_attached(timeout=_load_ms(60))
        # plots draw asynchronously: scroll each into view until all are drawn, polled in the
        # page every 250 ms (up to 45 s, load-scaled), then judged here
        try:
            page.wait_for_function(f"""(n) => {{ const s = ({_SIZES})();
                return s.length >= n && s.every(([w, h, k, cw]) =>
                    w >= 200 && h >= 150 && k > 0 && Math.abs(w - cw) <= 3); }}""",
                                   arg=min_plots, polling=250, timeout=_load_ms(45))
        except PlaywrightTimeout:  # the assertions below say what is wrong
            pass
        sizes = page.evaluate(_SIZES)
        empty = [i for i, (w, h, n, _) in enumerate(sizes) if w < 200 or h < 150 or n == 0]
        # a drawing as wide as its container (not plotly's 700 px default, cut or narrow)
        misfit = [i for i, (w, _, _, cw) in enumerate(sizes) if abs(w - cw) > 3]
        assert len(sizes) >= min_plots, f"{path.name}: {len(sizes)} plots rendered"
        if empty:
            plots.nth(empty[0]).scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / f"{path.stem}-empty-plot.png"))
        assert not empty, f"{path.name}: plots {empty} did not render: {sizes}"
        if misfit:
            plots.nth(misfit[0]).scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / f"{path.stem}-misfit-plot.png"))
        assert not misfit, f"{path.name}: plots {misfit} are not as wide as their cell: {sizes}"
        widest = max((w for w, _, _, _ in sizes), default=None)
        assert widest is None or widest > 900, \
            f"{path.name}: figures do not use the cell's width ({widest} px)"
        if kind is not None:
            _control_redraws(page, path, out, kind, control, figure)
            _settled(page)  # the kernel's other updates drawn too (Gantt A follows B's axis)
        page.screenshot(path=str(SHOTS / f"{path.stem}.png"), full_page=True)
        if path.name.startswith("07"):
            _board_details(page, out)
        ok = True
    finally:
        if ok:
            _close_notebooks(page)
        else:  # the next notebook starts on a newly loaded JupyterLab
            page.close()
            tab["page"] = None
        _shutdown_kernels(lab["url"])
    assert (SHOTS / f"{path.stem}.png").stat().st_size > 10_000


def _settled(page) -> None:
    """Wait until the kernel is idle (every update of the last change sent and received) and
    the browser has drawn two more frames, so that a screenshot shows the final state."""
    from playwright.sync_api import expect

    expect(page.locator(".jp-StatusBar-Widget", has_text="| Idle").first).to_be_visible(
        timeout=_load_ms(60))
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def _control_redraws(page, path: Path, out: Path, kind: str, control: str, figure: str) -> None:
    """Change ``control`` (a select, checkbox, heatmap click or slider) and wait until
    ``figure`` shows something else."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    target = page.locator(control).first
    target.scroll_into_view_if_needed()
    before = _figure_state(page, figure)
    assert before, f"{path.name}: no figure {figure}"
    if kind == "select":
        current = target.input_value()
        options = [o for o in target.locator("option").all_inner_texts() if o != current]
        target.select_option(label=options[0])
    elif kind == "checkbox":
        target.click()
    elif kind == "click":  # a cell in the middle of the second panel (another plan)
        box = target.locator('.nsewdrag[data-subplot="x2y2"]').first.bounding_box()
        page.mouse.click(box["x"] + 0.4 * box["width"], box["y"] + 0.5 * box["height"])
    else:  # an ipywidgets slider: move its handle with the keyboard
        handle = target.locator(".noUi-handle").first
        handle.focus()
        for _ in range(3):
            handle.press("ArrowRight")
    try:  # polled in the page every 250 ms
        page.wait_for_function(f"([sel, before]) => ({_STATE})(sel) !== before",
                               arg=[figure, before], polling=250, timeout=_load_ms(60))
    except PlaywrightTimeout:
        page.screenshot(path=str(out / f"nochange-{path.stem}.png"), full_page=True)
        raise AssertionError(f"{path.name}: {control} did not change {figure}") from None


def _board_details(page, out: Path) -> None:
    """Notebook 07: the board's Gantt pickers and the linked DAG/Gantt selection."""
    from playwright.sync_api import expect

    dag = page.locator(".wb-dag.js-plotly-plot").first
    expect(dag).to_be_visible(timeout=_load_ms(60))
    assert page.locator(".wb-dag .scatterlayer .trace .point").count() > 50
    for cls in ("wb-gantt-a", "wb-gantt-b"):
        expect(page.locator(f".{cls}.js-plotly-plot").first).to_be_visible()
        assert page.locator(f".{cls} .barlayer .point").count() > 20
    assert page.locator(".wb-compare .barlayer .point").count() >= 3
    # the two Gantts share one time axis: the same last tick label
    ticks = [page.locator(f".{c} .xtick text").all_inner_texts() for c in ("wb-gantt-a",
                                                                           "wb-gantt-b")]
    assert ticks[0] and ticks[0][-1] == ticks[1][-1], ticks
    select = page.locator(".wb-gantt-b-picker select").first
    options = select.locator("option").all_inner_texts()
    before = _gantt_title(page, "wb-gantt-b")
    target = next(o for o in options if not before.startswith(o + " "))
    select.select_option(label=target)
    expect(page.locator(".wb-gantt-b .gtitle").first).to_contain_text(target + " on ",
                                                                       timeout=_load_ms(30))
    after = _gantt_title(page, "wb-gantt-b")
    assert after != before and after.startswith(target)
    _settled(page)
    page.locator(".wb-gantt-b").first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "07_board_gantts.png"))
    # linked selection in the browser: click a DAG node, the Gantt outlines that op
    lone = page.locator(".wb-gantt:not(.wb-gantt-a):not(.wb-gantt-b)").first
    bars = lone.locator(".barlayer .point")
    n_bars = bars.count()  # the empty "selected" trace draws nothing yet
    node = dag.locator(".scatterlayer .trace").nth(2).locator(".point").nth(3)
    node.scroll_into_view_if_needed()
    box = node.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(bars).to_have_count(n_bars + 1, timeout=_load_ms(30))
    lone.screenshot(path=str(SHOTS / "07_gantt_selected.png"))
    page.locator(".wb-compare").first.screenshot(path=str(SHOTS / "07_compare.png"))
