"""Benchmark 2b — widget latency in JupyterLab in Chromium: key press on a slider -> visible change.

    .venv/bin/python -m tests.benchmarks.bench_browser [--presses 30] [chapters/NN_*/lesson.ipynb ...]

Serves the repository with JupyterLab on 127.0.0.1, opens each lesson in Debian's Chromium, runs
all cells, then for every slider presses an arrow key on its handle (alternating right/left, so
the value always changes) and times from the key press to the next frame painted after the
explorer's readout or picture changed. Budget: median <= 150 ms.
"""

import argparse
import pathlib
import sys
import tempfile

from playwright.sync_api import sync_playwright

from tests.benchmarks.common import git_revision, machine, print_table, summary_ms
from tests.browser.conftest import REPO, start_jupyter_lab, stop_jupyter_lab
from tests.browser.helpers import CHROMIUM, CHROMIUM_ARGS, CHROMIUM_MISSING, open_notebook, run_all_cells

BUDGET_MS = 150.0
SETTLE_MS = 300      # pause between presses, so each press is timed on its own

# Records, in window.__changedAt, the time of the first frame painted after any explorer readout
# or widget picture changes.
WATCH_JS = """
() => {
  window.__changedAt = null;
  if (window.__watcher) { window.__watcher.disconnect(); }
  const root = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)') || document.body;
  window.__watcher = new MutationObserver((mutations) => {
    const relevant = mutations.some(m => {
      const el = m.target.nodeType === 1 ? m.target : m.target.parentElement;
      return el && (el.closest('.explorer-readout') || (m.type === 'attributes' &&
                    el.matches('img.widget-image')));
    });
    if (relevant && window.__changedAt === null) {
      requestAnimationFrame(() => { window.__changedAt = performance.now(); });
    }
  });
  window.__watcher.observe(root, {subtree: true, childList: true, characterData: true,
                                  attributes: true, attributeFilter: ['src']});
}
"""


def time_presses(page, handle, presses: int) -> list[float]:
    """Seconds from each key press to the painted change; alternates right/left."""
    times, keys, flipped = [], ["ArrowRight", "ArrowLeft"], False
    handle.focus()
    while len(times) < presses:
        page.evaluate(WATCH_JS)
        start = page.evaluate("performance.now()")
        handle.press(keys[len(times) % 2])
        try:
            page.wait_for_function("window.__changedAt !== null", timeout=10_000)
        except Exception:
            if times or flipped:
                raise
            keys.reverse()          # at the end of its range the first key does nothing
            flipped = True
            continue
        times.append((page.evaluate("window.__changedAt") - start) / 1000)
        page.wait_for_timeout(SETTLE_MS)    # let the picture and the echo of this change land
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("lessons", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        sys.exit(CHROMIUM_MISSING)
    lessons = args.lessons or sorted((REPO / "chapters").glob("*/lesson.ipynb"))
    print(f"# Widget latency in the browser (key press -> painted change), {args.presses} presses "
          f"per slider — {machine()} — rev {git_revision()}")
    rows = []
    with tempfile.TemporaryDirectory() as state:
        server = start_jupyter_lab(REPO, pathlib.Path(state), pathlib.Path(state) / "lab.log")
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                                     args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                for lesson in lessons:
                    relpath = str(lesson.resolve().relative_to(REPO))
                    open_notebook(page, server.base_url, relpath)
                    run_all_cells(page, timeout_ms=600_000)
                    sliders = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .widget-slider")
                    for index in range(sliders.count()):
                        slider = sliders.nth(index)
                        slider.scroll_into_view_if_needed()
                        name = slider.locator(".widget-label").first.inner_text() or f"slider {index}"
                        print(f"  {lesson.parent.name}: {name}", file=sys.stderr)
                        median, p95 = summary_ms(time_presses(page, slider.locator(".noUi-handle").first,
                                                              args.presses))
                        rows.append([lesson.parent.name[:2], name, f"{median:.0f}", f"{p95:.0f}",
                                     "ok" if median <= BUDGET_MS else "OVER"])
                browser.close()
        finally:
            stop_jupyter_lab(server)
    print_table(["lesson", "slider", "median ms", "p95 ms", "budget (median)"], rows)
    within = sum(r[-1] == "ok" for r in rows)
    print(f"budget: median <= {BUDGET_MS:.0f} ms — {within} of {len(rows)} sliders within")
    return 0


if __name__ == "__main__":
    sys.exit(main())
