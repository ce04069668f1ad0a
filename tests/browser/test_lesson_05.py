"""Lesson 5 in a real browser: open it, run the cells its explorer needs, change the number of
heads and the valid length, see the readout and the per-head picture change.

Only the cells the explorer needs run (the set-up and the explorer): the rest of the lesson
(costs, timings, PyTorch parity) runs under strict nbval in both lanes of `make test`, and its
committed outputs are rendered here when the notebook opens, so the console check still sees
them.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (find_slider, open_notebook, press_slider_keys, run_cells,
                                   save_screenshot, set_slider_by_readout, slider_value,
                                   wait_for_text_change)

LESSON = "chapters/05_multihead_attention/lesson.ipynb"
# The cells the explorer needs, each named by a snippet of its code.
EXPLORER_CELLS = ['set_language("en")', "heads_explorer = HeadsExplorer("]


def _looks_at(text: str) -> list[int]:
    """The keys each head looks at hardest, from the readout, e.g. '[3, 4, 5]'."""
    match = re.search(r"looks hardest at keys: \[([\d, ]+)\]", text)
    assert match, f"no 'looks hardest at keys' in the readout {text!r}"
    return [int(k) for k in match.group(1).split(",")]


@pytest.mark.browser
def test_lesson_05_heads_slider_changes_the_panels(jupyter_lab, lab_page, console_errors,
                                                   artifacts_dir):
    page = lab_page
    open_notebook(page, jupyter_lab.base_url, LESSON)
    run_cells(page, EXPLORER_CELLS)

    readout = page.locator(".explorer-readout", has_text="heads:")
    expect(readout).to_have_count(1)
    start = readout.inner_text()
    assert start.startswith("heads: 3"), start
    assert _looks_at(start) == [3, 4, 5]                 # previous, same, next for query 4

    picture = page.locator("img.widget-image").first
    old_src = picture.get_attribute("src")
    assert old_src, "the heads picture has no image yet"

    # One step right on the heads slider (divisors of 12: 1, 2, 3, 4, 6, 12): 3 -> 4 heads.
    press_slider_keys(page, "heads", "ArrowRight", 1)
    after = wait_for_text_change(readout, start)
    assert after.startswith("heads: 4") and "head size: 3" in after, after
    assert _looks_at(after) == [3, 4, 5, 2]              # a fourth panel: two steps back
    expect(picture).not_to_have_attribute("src", old_src)

    # Two more steps: 4 -> 6 -> 12 heads of size 1, which collapse onto an end.
    press_slider_keys(page, "heads", "ArrowRight", 2)
    expect(readout).to_contain_text("heads: 12")
    expect(readout).to_contain_text("size-1 heads can only pick the first or last key")

    # Back to 4 heads, then mask the last three keys by typing a valid length.
    press_slider_keys(page, "heads", "ArrowLeft", 2)
    expect(readout).to_contain_text("heads: 4")
    before_len = readout.inner_text()
    src_before_len = picture.get_attribute("src")
    set_slider_by_readout(page, find_slider(page, "valid length"), 5)
    masked = wait_for_text_change(readout, before_len)
    assert "valid length: 5" in masked and _looks_at(masked) == [3, 4, 4, 2], masked
    assert slider_value(find_slider(page, "valid length")) == 5
    expect(picture).not_to_have_attribute("src", src_before_len)

    picture.scroll_into_view_if_needed()
    shot = save_screenshot(page, artifacts_dir, "lesson_05_heads")
    assert shot.stat().st_size > 10_000
    console_errors.assert_none()
