"""Lesson 6 in a real browser: open it, run the cells its explorer needs, move the
encoding-dimension slider, see readout and picture change.

Only the cells the explorer needs run (the set-up and the explorer): the rest of the lesson
(costs, timings, the encoding's properties) runs under strict nbval in both lanes of
`make test`, and its committed outputs are rendered here when the notebook opens, so the console
check still sees them.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (find_slider, open_notebook, press_slider_keys, run_cells,
                                   save_screenshot, set_slider_by_readout, slider_value,
                                   wait_for_text_change)

LESSON = "chapters/06_self_attention_positional_encoding/lesson.ipynb"
# The cells the explorer needs, each named by a snippet of its code.
EXPLORER_CELLS = ['set_language("en")', "explorer = PositionalEncodingExplorer("]


def _dimension_in(text: str) -> int:
    """The encoding dimension printed at the start of the explorer's readout, e.g. 'd = 32, ...'."""
    match = re.match(r"d = (\d+), base = ", text)
    assert match, f"no encoding dimension in the readout {text!r}"
    return int(match.group(1))


@pytest.mark.browser
def test_lesson_06_dimension_slider_redraws_the_encoding(jupyter_lab, lab_page, console_errors,
                                                         artifacts_dir):
    page = lab_page
    open_notebook(page, jupyter_lab.base_url, LESSON)
    run_cells(page, EXPLORER_CELLS)

    readout = page.locator(".explorer-readout", has_text="similarity depends only on")
    expect(readout).to_have_count(1)
    start = readout.inner_text()
    assert _dimension_in(start) == 32
    assert "columns 6–9" in start

    picture = page.locator("img.widget-image").first
    old_picture = picture.get_attribute("src")
    assert old_picture, "the explorer's image has no picture yet"

    # Arrow keys: two steps of 2 from d = 32.
    slider = find_slider(page, "encoding dim")
    press_slider_keys(page, slider, "ArrowRight", 2)
    wait_for_text_change(readout, start)
    expect(readout).to_contain_text("d = 36, base = 10000")      # after both key presses
    assert _dimension_in(readout.inner_text()) == 36
    assert slider_value(slider) == 36
    expect(picture).not_to_have_attribute("src", old_picture)

    # Typing into the readout: d = 8 leaves columns 4..7 as the last four, so the column slider
    # (first column 6) is pulled back to 4.
    set_slider_by_readout(page, slider, 8)
    expect(readout).to_contain_text("d = 8, base = 10000")
    expect(readout).to_contain_text("columns 4–7")
    assert slider_value(find_slider(page, "first column")) == 4

    readout.scroll_into_view_if_needed()
    shot = save_screenshot(page, artifacts_dir, "lesson_06_after_sliders")
    assert shot.stat().st_size > 10_000
    console_errors.assert_none()
