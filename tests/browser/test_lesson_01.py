"""Lesson 1 in a real browser: run it, move every slider, see the weights readout change."""

import math
import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (find_slider, open_notebook, press_slider_keys, run_all_cells,
                                   save_screenshot, set_slider_by_readout, wait_for_text_change)

LESSON = "chapters/01_attention_cues/lesson.ipynb"


def _weights_in(text: str) -> list[float]:
    match = re.search(r"weights: \[([-\d., ]+)\]", text)
    assert match, f"no weights in the readout {text!r}"
    return [float(w) for w in match.group(1).split(",")]


def _softmax_text(dots, temperature) -> str:
    scaled = [d / (math.sqrt(3) * temperature) for d in dots]
    exps = [math.exp(x - max(scaled)) for x in scaled]
    return "[" + ", ".join(f"{e / sum(exps):.2f}" for e in exps) + "]"


@pytest.mark.browser
def test_lesson_01_sliders_move_the_weights(jupyter_lab, lab_page, console_errors,
                                            artifacts_dir):
    page = lab_page
    open_notebook(page, jupyter_lab.base_url, LESSON)
    run_all_cells(page)

    # The course figure loads (it is served from assets/, outside the chapter folder).
    figure = page.locator(".jp-RenderedMarkdown img[src*='attention_cues.svg']")
    expect(figure).to_have_count(1)
    figure.scroll_into_view_if_needed()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=figure.element_handle())

    readout = page.locator(".explorer-readout")
    expect(readout).to_have_count(1)
    text = readout.inner_text()
    assert _weights_in(text) == [0.0, 1.0, 0.0, 0.0]
    picture = page.locator("img.widget-image").last
    old_src = picture.get_attribute("src")

    # query entry 3 typed into its readout: [0, 10, 10] ties keys 2, 3, 4.
    set_slider_by_readout(page, find_slider(page, "query entry 3"), 10)
    text = wait_for_text_change(readout, text)
    assert _weights_in(text) == [0.0, 0.33, 0.33, 0.33]
    expect(picture).not_to_have_attribute("src", old_src)

    # query entry 2 down to 0 with arrow keys (20 steps of 0.5): keys 3 and 4 share the weight.
    press_slider_keys(page, "query entry 2", "ArrowLeft", 20)
    expect(readout).to_contain_text("weights: [0.00, 0.00, 0.50, 0.50]")
    expect(readout).to_contain_text("output: [550.00, 5.50]")

    # query entry 1 up to 10: [10, 0, 10] ties keys 1, 3 and 4.
    press_slider_keys(page, "query entry 1", "ArrowRight", 20)
    expect(readout).to_contain_text("weights: [0.33, 0.00, 0.33, 0.33]")

    # Query [1, 1.5, 0], a little closer to key 2; then a large temperature flattens the weights.
    # Expected values computed here with a plain softmax, independently of utils.
    for name, value in (("query entry 1", 1), ("query entry 2", 1.5), ("query entry 3", 0)):
        set_slider_by_readout(page, name, value)
    expect(readout).to_contain_text(f"weights: {_softmax_text([10, 15, 0, 0], 1.0)}")
    set_slider_by_readout(page, "temperature", 10)
    expect(readout).to_contain_text(f"weights: {_softmax_text([10, 15, 0, 0], 10.0)}")

    readout.scroll_into_view_if_needed()
    shot = save_screenshot(page, artifacts_dir, "lesson_01_after_sliders")
    assert shot.stat().st_size > 10_000
    console_errors.assert_none()
