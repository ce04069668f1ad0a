"""The browser harness itself, on a one-slider notebook (tests/browser/fixtures/slider_probe.ipynb).

The probe notebook shows an IntSlider described "probe" (min 0, max 20, starts at 3) and an HTML
widget with class ``probe-readout`` that an ``observe`` callback in the kernel sets to
``value squared = N``. Seeing that text change proves the whole loop works: page -> widget
model -> kernel -> widget model -> page.
"""

from __future__ import annotations

import hashlib
import re
import sys

import nbformat
import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (ConsoleErrors, find_slider, open_notebook, press_slider_keys,
                                   run_all_cells, run_cells, save_screenshot, set_slider_by_readout,
                                   slider_value, wait_for_text_change)
from tests.conftest import ARTIFACTS, REPO

PROBE = "tests/browser/fixtures/slider_probe.ipynb"


def _readout_text(value: int) -> str:
    return f"value squared = {value * value}"


@pytest.mark.browser
def test_probe_slider_drives_the_kernel(jupyter_lab, lab_page, console_errors, artifacts_dir):
    page = lab_page
    probe_bytes = hashlib.sha256((REPO / PROBE).read_bytes()).hexdigest()

    open_notebook(page, jupyter_lab.base_url, PROBE)
    run_all_cells(page)

    # The kernel is this environment's Python (the first cell prints sys.prefix).
    expect(page.locator(".jp-OutputArea-output", has_text="kernel prefix:")).to_have_text(
        f"kernel prefix: {sys.prefix}")

    slider = find_slider(page, "probe")
    readout = page.locator(".probe-readout")
    expect(readout).to_have_text(_readout_text(3))
    assert slider_value(slider) == 3

    set_slider_by_readout(page, slider, 7)
    assert wait_for_text_change(readout, _readout_text(3)) == _readout_text(7)

    press_slider_keys(page, slider, "ArrowRight", 3)
    expect(readout).to_have_text(_readout_text(10))
    press_slider_keys(page, "probe", "ArrowLeft", 1)
    expect(readout).to_have_text(_readout_text(9))

    shot = save_screenshot(page, artifacts_dir, "probe_after_keys")
    assert shot.stat().st_size > 10_000
    console_errors.assert_none()
    # Autosave is off: running the notebook in the browser did not rewrite it.
    assert hashlib.sha256((REPO / PROBE).read_bytes()).hexdigest() == probe_bytes


@pytest.mark.browser
def test_lab_settings_keep_tests_off_the_repo_and_network(jupyter_lab, browser_page):
    settings = {}
    for plugin in ("@jupyterlab/docmanager-extension:plugin", "@jupyterlab/notebook-extension:tracker",
                   "@jupyterlab/apputils-extension:notification"):
        response = browser_page.request.get(f"{jupyter_lab.base_url}/lab/api/settings/{plugin}")
        assert response.ok, f"{plugin}: HTTP {response.status}"
        settings[plugin] = response.json()["settings"]
    assert settings["@jupyterlab/docmanager-extension:plugin"]["autosave"] is False
    assert settings["@jupyterlab/notebook-extension:tracker"]["windowingMode"] == "none"
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert settings["@jupyterlab/apputils-extension:notification"]["checkForUpdates"] is False


def _raise_three_errors(page, messages: list, tag: str) -> tuple:
    """A console error, an uncaught exception and an off-machine request in ``page``; wait until
    ``messages`` reports all three (they arrive asynchronously) and return their texts."""
    page.evaluate(f"console.error('{tag} console error')")
    page.evaluate(f"setTimeout(() => {{ throw new Error('{tag} uncaught error'); }}, 0)")
    page.evaluate(f"fetch('http://example.invalid/{tag}').catch(() => null)")
    expected = (f"{tag} console error", f"{tag} uncaught error",
                f"blocked network request to http://example.invalid/{tag}")
    for _ in range(50):
        if all(any(text in message for message in messages) for text in expected):
            break
        page.wait_for_timeout(100)
    return expected


@pytest.mark.browser
@pytest.mark.parametrize("page_fixture", ["browser_page", "lab_page"])
def test_console_errors_catch_errors_and_network_use(request, page_fixture, console_errors):
    page = request.getfixturevalue(page_fixture)
    if page_fixture == "browser_page":
        page.set_content("<p>console probe</p>")   # the shared lab page stays on JupyterLab
    console_errors.assert_none()
    expected = _raise_three_errors(page, console_errors.messages, "probe")
    with pytest.raises(AssertionError) as failure:
        console_errors.assert_none()
    for text in expected:
        assert text in str(failure.value)


@pytest.mark.browser
def test_lab_page_reports_errors_between_tests_to_the_next_test(lab_page, _shared_lab_page,
                                                                console_errors):
    relay = _shared_lab_page["relay"]
    relay.stop()                           # as after a test: nobody's test is running
    try:
        expected = _raise_three_errors(lab_page, relay.holding.messages, "between")
    finally:
        next_test = ConsoleErrors()
        relay.start(next_test)             # the next test gets them
        relay.start(console_errors)        # and this one nothing more
    for text in expected:
        assert any(message.startswith("(between tests)") and text in message
                   for message in next_test.messages), next_test.messages
    console_errors.assert_none()


@pytest.mark.browser
def test_helpers_reject_bad_input(jupyter_lab, lab_page, console_errors):
    page = lab_page
    with pytest.raises(ValueError, match="relative to the repository root"):
        open_notebook(page, jupyter_lab.base_url, "/etc/passwd.ipynb")
    with pytest.raises(FileNotFoundError, match="no notebook"):
        open_notebook(page, jupyter_lab.base_url, "tests/browser/fixtures/missing.ipynb")

    open_notebook(page, jupyter_lab.base_url, PROBE)
    run_all_cells(page)
    slider = find_slider(page, "probe")
    with pytest.raises(LookupError, match=r"no slider described 'no such slider'.*\['probe'\]"):
        find_slider(page, "no such slider", timeout_ms=500)
    with pytest.raises(ValueError, match="key must be one of"):
        press_slider_keys(page, slider, "Right", 1)
    with pytest.raises(ValueError, match="times must be a positive int"):
        press_slider_keys(page, slider, "ArrowRight", 0)
    # 25 is above max=20: ipywidgets would clamp it silently; the helper must say so.
    with pytest.raises(AssertionError, match="outside its min/max"):
        set_slider_by_readout(page, slider, 25, timeout_ms=1_000)
    readout = page.locator(".probe-readout")
    expect(readout).to_have_text(_readout_text(20))  # the clamped value reached the kernel
    with pytest.raises(AssertionError, match="stayed"):
        wait_for_text_change(readout, _readout_text(20), timeout_ms=300)
    console_errors.assert_none()


def _write_notebook(path, sources: list[str]) -> str:
    """Write a notebook of code cells under tests/artifacts/ (served, not in git); return its relpath."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in sources])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                       "language": "python"}
    nbformat.write(notebook, path)
    return path.relative_to(REPO).as_posix()


@pytest.mark.browser
def test_run_all_cells_skips_empty_cells_and_reports_errors(jupyter_lab, lab_page, artifacts_dir):
    page = lab_page
    assert artifacts_dir.is_relative_to(ARTIFACTS)
    with_empty = _write_notebook(artifacts_dir / "with_empty_cell.ipynb",
                                 ["", "print('ran after an empty cell')", ""])
    open_notebook(page, jupyter_lab.base_url, with_empty)
    run_all_cells(page)
    expect(page.locator(".jp-OutputArea-output")).to_have_text("ran after an empty cell")

    failing = _write_notebook(artifacts_dir / "failing_cell.ipynb",
                              ["x = 1", "raise ValueError('probe failure in a cell')", "print('never runs')"])
    open_notebook(page, jupyter_lab.base_url, failing)
    # A fresh workspace each time: the previous notebook is not restored beside this one,
    # and its kernel is shut down (the page is reused: lab_page).
    expect(page.locator(".jp-NotebookPanel")).to_have_count(1)
    sessions = page.request.get(f"{jupyter_lab.base_url}/api/sessions").json()
    paths = [session["path"] for session in sessions]
    assert failing in paths and with_empty not in paths, paths
    with pytest.raises(AssertionError, match="ValueError: probe failure in a cell"):
        run_all_cells(page)


@pytest.mark.browser
def test_run_cells_runs_only_the_cells_named_and_reports_errors(jupyter_lab, lab_page,
                                                                 artifacts_dir):
    page = lab_page
    partial = _write_notebook(artifacts_dir / "partial_run.ipynb",
                              ["x = 6", "raise ValueError('a cell not named')", "x = x * 7",
                               "print('answer', x)", "print('same text')", "print('same text')",
                               "raise ValueError('probe failure in a named cell')",
                               "print('after the failure')"])
    open_notebook(page, jupyter_lab.base_url, partial)
    with pytest.raises(LookupError, match="0 code cells contain 'no such code'"):
        run_cells(page, ["x = 6", "no such code"])
    with pytest.raises(LookupError, match="2 code cells contain 'same text'"):
        run_cells(page, ["same text"])
    with pytest.raises(ValueError, match="non-empty list"):
        run_cells(page, [])
    # Given out of order, run in notebook order; the cell that raises is not among them.
    run_cells(page, ["print('answer'", "x = 6", "x * 7"])
    expect(page.locator(".jp-OutputArea-output")).to_have_text("answer 42")
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
    assert [bool(re.search(r"\d", p)) for p in prompts] == [True, False, True, True, False,
                                                              False, False, False], prompts

    with pytest.raises(AssertionError, match="ValueError: probe failure in a named cell"):
        run_cells(page, ["x = 6", "probe failure", "after the failure"])
    # The cell after the one that raised never ran.
    expect(page.locator(".jp-OutputArea-output", has_text="after the failure")).to_have_count(0)
