"""Helpers that drive JupyterLab in a real browser (Playwright + Debian's Chromium).

Every browser test of a lesson uses the same few steps::

    open_notebook(page, jupyter_lab.base_url, "chapters/02_attention_pooling/lesson.ipynb")
    run_all_cells(page)            # or run_cells(page, [snippets of the cells the explorer needs])
    slider = find_slider(page, "bandwidth")
    readout = page.locator(".pooling-readout")      # a widget given a CSS class with add_class
    old = readout.inner_text()
    set_slider_by_readout(page, slider, 0.5)      # or: press_slider_keys(page, slider, "ArrowRight", 3)
    wait_for_text_change(readout, old)
    console_errors.assert_none()

Typing into a slider's readout or pressing arrow keys on its handle is used instead of
dragging: both are exact and do not depend on pixel geometry.
"""

from __future__ import annotations

import numbers
import pathlib
import re
import time
import urllib.parse

from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

CHROMIUM = pathlib.Path("/usr/bin/chromium")
CHROMIUM_MISSING = (f"{CHROMIUM} not found: install Debian's chromium "
                    f"(apt-get install chromium chromium-driver); `playwright install` cannot "
                    f"download browsers on this machine")
# Headless Debian Chromium, with every background fetch it would make on its own turned off.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--no-proxy-server",
]

SLIDER_KEYS = ("ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "PageUp", "PageDown", "Home", "End")
DEFAULT_TIMEOUT_MS = 30_000

# Console errors that are not the course's fault, each with the reason it is ignored. None so far:
# JupyterLab 4.6 + ipywidgets 8.1 log no errors in these tests. Add one only with its reason.
BENIGN_CONSOLE_ERRORS: tuple[re.Pattern, ...] = ()


class ConsoleErrors:
    """Collects a page's console errors, uncaught exceptions and blocked off-machine requests."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def attach(self, page: Page) -> None:
        """Start listening to ``page``; call once, before the page loads anything."""
        page.on("console", self.record_console_message)
        page.on("pageerror", self.record_page_error)

    def record_page_error(self, error) -> None:
        """Note an uncaught exception in the page."""
        self.messages.append(f"uncaught page error: {error}")

    def record_blocked_request(self, url: str) -> None:
        """Note a request that tried to leave the machine (the harness blocks those)."""
        self.messages.append(f"blocked network request to {url} (tests must not use the network)")

    def record_console_message(self, message) -> None:
        """Note a console message if it is an error (not one of BENIGN_CONSOLE_ERRORS)."""
        if message.type != "error":
            return
        text = message.text
        if any(pattern.search(text) for pattern in BENIGN_CONSOLE_ERRORS):
            return
        where = message.location.get("url", "")
        self.messages.append(f"console.error: {text}" + (f" (at {where})" if where else ""))

    def assert_none(self) -> None:
        """Fail, listing every message, if anything went wrong in the page."""
        if self.messages:
            listing = "\n  ".join(self.messages)
            raise AssertionError(f"{len(self.messages)} browser error(s):\n  {listing}")


def _active_notebook(page: Page) -> Locator:
    """The notebook panel currently shown in the main area."""
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


# Runs in the page: the kernel of the notebook in the main area, as JupyterLab itself sees it
# (needs JupyterLab started with --LabApp.expose_app_in_browser=True, as the jupyter_lab fixture does).
# The toolbar's status circle is no use here: it reads "idle" before any kernel is connected.
_KERNEL_STATE_JS = """
() => {
  const app = window.jupyterapp;
  if (!app) return 'no-app';
  const context = app.shell.currentWidget && app.shell.currentWidget.sessionContext;
  const kernel = context && context.session && context.session.kernel;
  if (!kernel) return 'no-kernel';
  return kernel.connectionStatus === 'connected' ? kernel.status : kernel.connectionStatus;
}
"""


# Runs in the page: close every document in the main area without saving it, shut its kernel
# down (so the notebook opened next gets a kernel of its own even when it is the same file), then
# open ``path`` with JupyterLab's own command. Returns false, doing nothing, when the page is not
# in a state to reuse (no app, or a dialog is shown).
_OPEN_IN_PLACE_JS = """
async (path) => {
  const app = window.jupyterapp;
  if (!app || document.querySelector('.jp-Dialog')) return false;
  for (const widget of Array.from(app.shell.widgets('main'))) {
    const context = widget.sessionContext;
    if (context && context.session) await context.shutdown();
    if (widget.context && widget.context.model) widget.context.model.dirty = false;
    widget.dispose();
  }
  await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  return true;
}
"""


def _open_in_place(page: Page, base_url: str, relpath: str) -> bool:
    """Open ``relpath`` in the JupyterLab the page already shows (the ``lab_page`` fixture's
    page, from the second test on): about 5 s less per test than loading JupyterLab again.
    Returns False when the page shows no JupyterLab of ``base_url``'s server."""
    if not page.url.startswith(f"{base_url}/lab"):
        return False
    return page.evaluate(_OPEN_IN_PLACE_JS, relpath)


def open_notebook(page: Page, base_url: str, relpath: str, timeout_ms: int = 60_000) -> Locator:
    """Open ``relpath`` (relative to the server's root, e.g. ``chapters/01_.../lesson.ipynb``)
    in JupyterLab and wait until its notebook panel is shown and its kernel is idle.

    If the page already shows this server's JupyterLab, the notebook is opened in it, after the
    documents shown before are closed unsaved and their kernels shut down (the notebook gets a
    new kernel); otherwise JupyterLab is loaded with an empty workspace. Either way the notebook
    is the only document open. Returns the notebook panel's locator.
    """
    parts = pathlib.PurePosixPath(relpath).parts
    if not relpath.endswith(".ipynb") or relpath.startswith("/") or ".." in parts:
        raise ValueError(f"relpath must be a notebook path relative to the repository root "
                         f"(like 'chapters/01_attention_cues/lesson.ipynb'), got {relpath!r}")
    quoted = urllib.parse.quote(relpath)
    probe = page.request.get(f"{base_url}/api/contents/{quoted}?content=0")
    if probe.status == 404:
        raise FileNotFoundError(f"JupyterLab's root has no notebook {relpath!r}; "
                                f"pass a path relative to the repository root")
    if not _open_in_place(page, base_url, relpath):
        # ?reset: start from an empty workspace, so notebooks opened earlier are not restored too.
        page.goto(f"{base_url}/lab/tree/{quoted}?reset")
    panel = _active_notebook(page)
    expect(panel).to_have_count(1, timeout=timeout_ms)
    _wait_for_idle_kernel(page, timeout_ms)
    return panel


def wait_for_idle_kernel(page: Page, timeout_ms: int = 60_000) -> None:
    """Wait until the shown notebook's kernel has handled every widget event sent so far."""
    _wait_for_idle_kernel(page, timeout_ms)


def _wait_for_idle_kernel(page: Page, timeout_ms: int) -> None:
    """Wait until the shown notebook's kernel is connected and idle; a dialog in the way is an error."""
    deadline = time.monotonic() + timeout_ms / 1000
    state = None
    while time.monotonic() < deadline:
        dialog = page.locator(".jp-Dialog")
        if dialog.count():
            raise AssertionError(f"JupyterLab shows a dialog instead of a running kernel: "
                                 f"{dialog.first.inner_text()!r}")
        state = page.evaluate(_KERNEL_STATE_JS)
        if state == "idle":
            return
        if state == "no-app":
            raise AssertionError("window.jupyterapp is missing: start JupyterLab with "
                                 "--LabApp.expose_app_in_browser=True (the jupyter_lab fixture does)")
        page.wait_for_timeout(100)
    raise AssertionError(f"the notebook's kernel was not idle within {timeout_ms / 1000:.0f} s "
                         f"(last state: {state})")


def _click_menu(page: Page, menu: str, item: str) -> None:
    """Click ``menu`` in the main menu bar, then its entry ``item`` (labels as shown)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(menu)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}$")).click()


# Runs in the page: null while Run All Cells is still going, else the errors it raised.
# The run is over when no prompt shows [*] and either every non-empty code cell has an execution
# number or a cell raised (the cells after it are never run). Tracebacks and plain stderr look the
# same on the page, so errors are read from the cell models.
_RUN_RESULT_JS = """
() => {
  const app = window.jupyterapp;
  const notebook = app && app.shell.currentWidget && app.shell.currentWidget.content;
  if (!notebook || !notebook.widgets) return null;
  const cells = notebook.widgets.filter(cell => cell.model.type === 'code');
  const prompt = cell => (cell.node.querySelector('.jp-InputPrompt')?.textContent || '');
  if (cells.some(cell => prompt(cell).includes('*'))) return null;
  const errors = [];
  for (const cell of cells) {
    for (const output of cell.model.outputs.toJSON()) {
      if (output.output_type === 'error') errors.push(`${output.ename}: ${output.evalue}`);
    }
  }
  const finished = cells.every(cell => cell.model.sharedModel.getSource().trim() === ''
                                       || cell.model.executionCount !== null);
  return (finished || errors.length) ? {errors} : null;
}
"""


def run_all_cells(page: Page, timeout_ms: int = 120_000) -> None:
    """Clear all outputs, run every cell (Run > Run All Cells) and wait until the run is over:
    no cell shows ``[*]``, every non-empty code cell has an execution number and the kernel is idle.

    Raises AssertionError naming the exception if a cell raised one.
    Outputs are cleared first so that numbers saved in the notebook do not look like a finished run.
    The notebook is never saved (the harness turns autosave off).
    """
    _click_menu(page, "Edit", "Clear Outputs of All Cells")
    _click_menu(page, "Run", "Run All Cells")
    try:
        result = page.wait_for_function(_RUN_RESULT_JS, timeout=timeout_ms, polling=100).json_value()
    except PlaywrightTimeoutError:
        raise AssertionError(f"Run All Cells did not finish within {timeout_ms / 1000:.0f} s") from None
    if result["errors"]:
        raise AssertionError(f"a cell raised during Run All Cells: {'; '.join(result['errors'])}")
    _wait_for_idle_kernel(page, timeout_ms)


# Runs in the page: the indices of the code cells whose source contains each snippet.
_CELLS_CONTAINING_JS = """
(snippets) => {
  const app = window.jupyterapp;
  const notebook = app && app.shell.currentWidget && app.shell.currentWidget.content;
  if (!notebook || !notebook.widgets) return null;
  const code = notebook.widgets.map((cell, index) => [cell, index])
                               .filter(([cell]) => cell.model.type === 'code');
  return snippets.map(snippet => code.filter(([cell]) => cell.model.sharedModel.getSource()
                                                             .includes(snippet))
                                     .map(([, index]) => index));
}
"""

# Runs in the page: run the cells at ``indices`` one after another with JupyterLab's own
# "Run Selected Cell" command (each waits for the one before), stopping at the first cell that
# raises. Progress is kept in window.__coursePartialRun; the call returns at once.
_RUN_CELLS_JS = """
(indices) => {
  const app = window.jupyterapp;
  const notebook = app.shell.currentWidget.content;
  const state = {done: false, errors: [], ran: []};
  window.__coursePartialRun = state;
  (async () => {
    for (const index of indices) {
      notebook.activeCellIndex = index;
      notebook.deselectAll();
      await app.commands.execute('notebook:run-cell');
      const cell = notebook.widgets[index];
      for (const output of cell.model.outputs.toJSON()) {
        if (output.output_type === 'error') state.errors.push(`${output.ename}: ${output.evalue}`);
      }
      if (cell.model.executionCount !== null) state.ran.push(index);
      if (state.errors.length) break;
    }
  })().catch(error => state.errors.push(`the run stopped: ${error}`))
      .finally(() => { state.done = true; });
}
"""


def run_cells(page: Page, snippets: list[str], timeout_ms: int = 120_000) -> None:
    """Clear all outputs, then run only the code cells that contain the given snippets (each
    snippet must occur in exactly one code cell), in notebook order, as a student would with
    Run > Run Selected Cell; wait until they have run and the kernel is idle.

    For lessons whose explorer needs a few of the cells only: the others (held-out scores,
    benchmarks) are what strict nbval runs anyway. Raises LookupError if a snippet matches no
    code cell or several, AssertionError naming the exception if a cell raised one or a cell
    did not run. The notebook is never saved (the harness turns autosave off).
    """
    if not snippets or any(not isinstance(s, str) or not s.strip() for s in snippets):
        raise ValueError(f"snippets must be a non-empty list of non-blank strings, got {snippets!r}")
    matches = page.evaluate(_CELLS_CONTAINING_JS, list(snippets))
    if matches is None:
        raise AssertionError("no notebook is shown: call open_notebook first")
    for snippet, indices in zip(snippets, matches):
        if len(indices) != 1:
            raise LookupError(f"{len(indices)} code cells contain {snippet!r} (cells {indices}); "
                              f"pass a snippet found in exactly one code cell")
    indices = sorted({found[0] for found in matches})
    _click_menu(page, "Edit", "Clear Outputs of All Cells")
    page.evaluate(_RUN_CELLS_JS, indices)
    try:
        state = page.wait_for_function(
            "() => window.__coursePartialRun && window.__coursePartialRun.done"
            " ? window.__coursePartialRun : null", timeout=timeout_ms, polling=100).json_value()
    except PlaywrightTimeoutError:
        raise AssertionError(f"the cells {indices} did not finish within {timeout_ms / 1000:.0f} s"
                             ) from None
    if state["errors"]:
        raise AssertionError(f"a cell raised while running cells {indices}: "
                             f"{'; '.join(state['errors'])}")
    if state["ran"] != indices:
        raise AssertionError(f"cells {indices} were to run, these did: {state['ran']}")
    _wait_for_idle_kernel(page, timeout_ms)


def find_slider(page: Page, description: str, timeout_ms: int = 10_000) -> Locator:
    """The ipywidgets slider whose description label is exactly ``description``.

    Raises LookupError (listing the sliders on the page) if there is none, ValueError if several match.
    """
    label = page.locator(".widget-label").filter(
        has_text=re.compile(rf"^\s*{re.escape(description)}\s*$"))
    slider = page.locator(".widget-slider").filter(has=label)
    try:
        slider.first.wait_for(state="visible", timeout=timeout_ms)
    except PlaywrightTimeoutError:
        shown = page.locator(".widget-slider .widget-label").all_inner_texts()
        raise LookupError(f"no slider described {description!r} on the page; sliders shown: {shown}"
                          f" (did the cells run, and did the widget render?)") from None
    if slider.count() > 1:
        raise ValueError(f"{slider.count()} sliders are described {description!r}; "
                         f"give them distinct descriptions or pass a narrower locator")
    return slider


def _as_slider(page: Page, slider: Locator | str) -> Locator:
    return find_slider(page, slider) if isinstance(slider, str) else slider


_NUMBER = re.compile(r"^[+-]?\d*(?:\.(\d*))?(?:[eE]([+-]?\d+))?$")


def slider_value(slider: Locator) -> float:
    """The number the slider's readout shows (its model value, as ipywidgets formats it)."""
    text = slider.locator(".widget-readout").inner_text().strip()
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"the slider's readout shows {text!r}, not one number "
                         f"(range sliders are not supported)") from None


def _readout_tolerance(text: str) -> float:
    """Half a unit in the last digit the readout shows: '0.50' -> 0.005, '7' -> 0.5, '1.0e+03' -> 50."""
    match = _NUMBER.match(text.strip())
    decimals = len(match.group(1) or "") if match else 0
    exponent = int(match.group(2) or 0) if match else 0
    return 0.5 * 10.0 ** (exponent - decimals) * (1 + 1e-9)


def set_slider_by_readout(page: Page, slider: Locator | str, value: float, timeout_ms: int = 5_000) -> None:
    """Type ``value`` into the slider's editable readout and press Enter, as a student would.

    ``slider`` is a locator from ``find_slider`` or a description. Raises AssertionError if the
    readout does not end up showing ``value`` (to its displayed precision): for example when
    ``value`` is outside min/max, which ipywidgets would silently clamp.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"value must be a number, got {value!r}")
    slider = _as_slider(page, slider)
    readout = slider.locator(".widget-readout")
    if not readout.is_visible():
        raise ValueError("this slider has no readout (readout=False); use press_slider_keys instead")
    readout.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type(str(value))
    page.keyboard.press("Enter")
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        text = readout.inner_text().strip()
        shown = slider_value(slider)
        if abs(shown - value) <= _readout_tolerance(text):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the slider's readout shows {text} after typing {value}: "
                                 f"is {value} outside its min/max?")
        page.wait_for_timeout(20)


def press_slider_keys(page: Page, slider: Locator | str, key: str, times: int = 1) -> None:
    """Focus the slider's handle and press ``key`` (e.g. ``"ArrowRight"``) ``times`` times.

    Each press moves the slider by one step, like a student using the keyboard.
    """
    if key not in SLIDER_KEYS:
        raise ValueError(f"key must be one of {SLIDER_KEYS}, got {key!r}")
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"times must be a positive int, got {times!r}")
    handle = _as_slider(page, slider).locator(".noUi-handle").first
    handle.focus()
    # The keyboard, not handle.press: the same key events to the focused handle, without
    # Playwright's actionability checks before each press (about 90 ms a press under load).
    for _ in range(times):
        page.keyboard.press(key)
    if not handle.evaluate("handle => handle === document.activeElement"):
        raise AssertionError(f"the slider's handle lost the focus while {key} was pressed "
                             f"{times} times: the presses did not all reach it")


def wait_for_text_change(locator: Locator, old_text: str, timeout_ms: int = 5_000) -> str:
    """Wait until ``locator``'s ``inner_text()`` differs from ``old_text``; return the new text.

    Compared as ``inner_text()`` on both sides: Playwright's ``not_to_have_text`` reads the
    text content, in which a ``<br>`` is no line break, so a readout of several lines would
    count as changed at once.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        text = locator.inner_text()
        if text != old_text:
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"text stayed {old_text!r} for {timeout_ms / 1000:.1f} s")
        time.sleep(0.05)


def save_screenshot(page: Page, artifacts_dir: pathlib.Path, name: str) -> pathlib.Path:
    """Save a PNG of the page as ``artifacts_dir/<name>.png`` and return its path."""
    if not name or "/" in name or "\\" in name:
        raise ValueError(f"name must be a plain file name like 'after_slider', got {name!r}")
    path = pathlib.Path(artifacts_dir) / (name if name.endswith(".png") else f"{name}.png")
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    return path
