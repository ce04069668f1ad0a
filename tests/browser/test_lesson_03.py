"""Lesson 3 in a real browser: open it, run the cells its explorers need, move the valid-length
sliders, see the readouts change.

Only the cells the explorers need run (the set-up and the two explorers): the rest of the lesson
(scoring functions, saturation and training demos) runs under strict nbval in both lanes of
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

LESSON = "chapters/03_scoring_functions/lesson.ipynb"
# The cells the explorer needs, each named by a snippet of its code.
EXPLORER_CELLS = ['set_language("en")', "mask_explorer = MaskExplorer(", "scale_explorer = ScaleExplorer("]


def _lengths_in(text: str) -> list[int]:
    """The valid lengths printed by the mask explorer's readout, e.g. '[5, 5, 2, 5, 5]'."""
    match = re.search(r"valid lengths(?: \(causal\))?: \[([\d, ]+)\]", text)
    assert match, f"no valid lengths in the readout {text!r}"
    return [int(n) for n in match.group(1).split(",")]


@pytest.mark.browser
def test_lesson_03_sliders_drive_both_explorers(jupyter_lab, lab_page, console_errors,
                                                artifacts_dir):
    page = lab_page
    open_notebook(page, jupyter_lab.base_url, LESSON)
    run_cells(page, EXPLORER_CELLS)

    mask_readout = page.locator(".explorer-readout", has_text="valid lengths")
    scale_readout = page.locator(".explorer-readout", has_text="mean entropy")
    expect(mask_readout).to_have_count(1)
    expect(scale_readout).to_have_count(1)
    start = mask_readout.inner_text()
    assert _lengths_in(start) == [5, 5, 5, 5, 5]

    # Type a new length for row 2: the readout's lengths change, and so does the heatmap picture
    # (an ipywidgets Image, the first one on the page, whose blob URL is replaced on each update).
    heatmap = page.locator("img.widget-image").first
    old_picture = heatmap.get_attribute("src")
    assert old_picture, "the heatmap image has no picture yet"
    row2 = find_slider(page, "length q2")
    set_slider_by_readout(page, row2, 2)
    after_typing = wait_for_text_change(mask_readout, start)
    assert _lengths_in(after_typing) == [5, 5, 2, 5, 5]
    expect(heatmap).not_to_have_attribute("src", old_picture)

    # Arrow keys on row 4: two steps down.
    row4 = find_slider(page, "length q4")
    press_slider_keys(page, row4, "ArrowLeft", 2)
    expect(mask_readout).to_contain_text("[5, 5, 2, 5, 3]")
    assert slider_value(row4) == 3

    # A length of 1 leaves one key with weight 1: that row's entropy is 0.
    set_slider_by_readout(page, "length q0", 1)
    expect(mask_readout).to_contain_text("entropy per row (nats): [0.00,")

    # The scale explorer: one step up from d = 16 with arrow keys.
    before_scale = scale_readout.inner_text()
    assert before_scale.startswith("d = 16,")
    press_slider_keys(page, "dimension d", "ArrowRight", 1)
    assert wait_for_text_change(scale_readout, before_scale).startswith("d = 32,")

    mask_readout.scroll_into_view_if_needed()
    shot = save_screenshot(page, artifacts_dir, "lesson_03_after_sliders")
    assert shot.stat().st_size > 10_000
    console_errors.assert_none()
