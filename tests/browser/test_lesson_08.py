"""Lesson 8 in a real browser: open it, run the cells its explorers need, move the sampling
sliders, type a prompt, scrub the induction run's checkpoints; each change shows in the readout
and the picture.

Only those cells run: the rest of the lesson (the key/value cache's timings, costs) runs under
strict nbval in both lanes of `make test`, and its committed outputs are rendered here when the
notebook opens, so the console check still sees them.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.helpers import (find_slider, open_notebook, press_slider_keys, run_cells,
                                   save_screenshot, set_slider_by_readout, slider_value,
                                   wait_for_text_change)

LESSON = "chapters/08_language_model/lesson.ipynb"
# The cells the explorers need, each named by a snippet of its code: the set-up (language, seed,
# Vocab), the data (whose cell imports LESSON_LM), the language model, the sampling explorer,
# the induction run's import, the run, its explorer.
EXPLORER_CELLS = ['set_language("en")', "sentences = lm_sentences(LESSON_LM)",
                  "= train_or_load_language_model(LESSON_LM)",
                  "sampling_explorer = SamplingExplorer(",
                  "from utils.induction import LESSON_INDUCTION",
                  "= train_or_load_induction(LESSON_INDUCTION)",
                  "induction_explorer = InductionExplorer("]


def prompt_box(page: Page) -> Locator:
    label = page.locator(".widget-label").filter(has_text=re.compile(r"^\s*prompt\s*$"))
    box = page.locator(".widget-text").filter(has=label)
    expect(box).to_have_count(1)
    return box.locator("input")


def kept(text: str) -> int:
    match = re.search(r"kept (\d+) tokens", text)
    assert match, f"no 'kept N tokens' in the readout {text!r}"
    return int(match.group(1))


@pytest.mark.browser
@pytest.mark.slow
def test_lesson_08_explorers_respond(jupyter_lab, lab_page, console_errors, artifacts_dir):
    page = lab_page
    open_notebook(page, jupyter_lab.base_url, LESSON)
    run_cells(page, EXPLORER_CELLS, timeout_ms=300_000)

    sampling = page.locator(".explorer-readout", has_text="read:")
    expect(sampling).to_have_count(1)
    start = sampling.inner_text()
    assert start.startswith("read: <bos> i am") and kept(start) == 1703, start
    picture = page.locator("img.widget-image").first
    old_src = picture.get_attribute("src")
    assert old_src, "the sampling picture has no image yet"

    # top-k: three key presses -> 3 tokens kept, grey bars (a new picture).
    press_slider_keys(page, "top-k", "ArrowRight", 3)
    wait_for_text_change(sampling, start)
    expect(sampling).to_contain_text("kept 3 tokens")
    expect(picture).not_to_have_attribute("src", old_src)

    # top-k off again, top-p 0.9 and a cold temperature: sampling turns greedy.
    press_slider_keys(page, "top-k", "Home")
    set_slider_by_readout(page, find_slider(page, "top-p"), 0.9)
    set_slider_by_readout(page, find_slider(page, "temperature"), 0.1)
    expect(sampling).to_contain_text("kept 1 tokens")
    assert slider_value(find_slider(page, "temperature")) == pytest.approx(0.1)

    # A new prompt: the readout reads it, unknown words as <unk>.
    box = prompt_box(page)
    box.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type("do you xyzzy")
    page.keyboard.press("Enter")
    expect(sampling).to_contain_text("read: <bos> do you <unk>")

    # The induction explorer: back to step 1,000, then the last checkpoint.
    induction = page.locator(".explorer-readout", has_text="second copy")
    expect(induction).to_have_count(1)
    expect(induction).to_contain_text("step 4000")
    maps = page.locator("img.widget-image").last
    last_src = maps.get_attribute("src")
    press_slider_keys(page, "training step", "Home")
    expect(induction).to_contain_text(re.compile(r"^step 0\D"))
    press_slider_keys(page, "training step", "ArrowRight", 4)
    expect(induction).to_contain_text("step 1000")
    early = induction.inner_text()
    assert float(re.search(r"second copy ([\d.]+)", early).group(1)) > 3
    expect(maps).not_to_have_attribute("src", last_src)
    press_slider_keys(page, "training step", "End")
    expect(induction).to_contain_text("step 4000")
    expect(induction).to_contain_text("second copy 0.19")

    maps.scroll_into_view_if_needed()
    shot = save_screenshot(page, artifacts_dir, "lesson_08_explorers")
    assert shot.stat().st_size > 10_000
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                        ).filter(has_text="Traceback").count() == 0
    console_errors.assert_none()
