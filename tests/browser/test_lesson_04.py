"""Lesson 4 in a real browser: open it, run the cells the alignment explorer needs, type
sentences into the explorer, move the slider.

Only those cells run (the set-up, the models the explorer uses, the explorer): the rest of the
lesson (held-out scores, alignment tables) runs under strict nbval in both lanes of
`make test`, and its committed outputs are rendered here when the notebook opens, so the
console check still sees them. The models load from ``assets/models``; a missing one would be
trained, hence the long timeout.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.helpers import (find_slider, open_notebook, press_slider_keys, run_cells,
                                   save_screenshot, slider_value)

LESSON = "chapters/04_bahdanau_attention/lesson.ipynb"
RUN_TIMEOUT_MS = 600_000
# The cells the explorer needs, each named by a snippet of its code: the set-up (language,
# seed), the book's settings and main model (whose cell imports train_or_load_bahdanau), the
# held-out split's cell (imports training_pairs), the guided model, the explorer.
EXPLORER_CELLS = ['set_language("en")', "config = BahdanauConfig()",
                  "= train_or_load_bahdanau(config)", "held = heldout_pairs()",
                  "train_or_load_bahdanau(LESSON_ALIGNED", "explorer = AlignmentExplorer("]


def find_text_box(page: Page, description: str) -> Locator:
    """The input of the ipywidgets Text whose description label is exactly ``description``.

    (Local helper: the shared harness only has slider helpers.)
    """
    label = page.locator(".widget-label").filter(
        has_text=re.compile(rf"^\s*{re.escape(description)}\s*$"))
    box = page.locator(".widget-text").filter(has=label)
    expect(box).to_have_count(1)
    return box.locator("input")


def type_sentence(page: Page, box: Locator, sentence: str) -> None:
    """Replace the text box's content by ``sentence`` and press Enter, as a student would."""
    box.click()
    page.keyboard.press("ControlOrMeta+a")
    if sentence:
        page.keyboard.type(sentence)
    else:
        page.keyboard.press("Backspace")
    page.keyboard.press("Enter")


@pytest.mark.browser
@pytest.mark.slow
def test_lesson_04_alignment_explorer(jupyter_lab, lab_page, console_errors, artifacts_dir):
    page = lab_page
    open_notebook(page, jupyter_lab.base_url, LESSON)
    run_cells(page, EXPLORER_CELLS, timeout_ms=RUN_TIMEOUT_MS)

    readout = page.locator(".explorer-readout")
    expect(readout).to_have_count(1)
    expect(readout).to_contain_text("i'm home . →")
    heatmap = page.locator("img.widget-image").last
    old_picture = heatmap.get_attribute("src")
    assert old_picture, "the alignment heatmap has no picture yet"

    # Type a sentence: a translation and a new heatmap appear.
    box = find_text_box(page, "English")
    type_sentence(page, box, "i lost .")
    # The readout may redraw once more for the old sentence while the step slider's range is
    # adjusted; what counts is the state it settles in.
    expect(readout).to_contain_text("i lost . →", timeout=10_000)
    after = readout.inner_text()
    assert after.startswith("i lost . →"), after
    assert re.search(r"→ \S", after), f"no translation in {after!r}"
    expect(heatmap).not_to_have_attribute("src", old_picture)

    # The slider picks an output word: step 0 after Home, then one step right.
    slider = find_slider(page, "output word")
    press_slider_keys(page, slider, "Home")
    expect(readout).to_contain_text("step 0:")
    picture = heatmap.get_attribute("src")
    press_slider_keys(page, slider, "ArrowRight")
    expect(readout).to_contain_text("step 1:")
    assert slider_value(slider) == 1
    expect(heatmap).not_to_have_attribute("src", picture)

    # Bad input gives a note, not a traceback.
    type_sentence(page, box, "")
    expect(readout).to_contain_text("note: the sentence is empty")
    type_sentence(page, box, "xyzzy plugh")
    expect(readout).to_contain_text("none of the words")
    type_sentence(page, box, "i'm home xyzzy .")
    expect(readout).to_contain_text("read as <unk>: 'xyzzy'")
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                        ).filter(has_text="Traceback").count() == 0

    type_sentence(page, box, "i'm home .")
    expect(readout).to_contain_text("i'm home . →")
    readout.scroll_into_view_if_needed()
    page.mouse.wheel(0, 250)
    shot = save_screenshot(page, artifacts_dir, "lesson_04_alignment_explorer")
    assert shot.stat().st_size > 10_000
    console_errors.assert_none()
