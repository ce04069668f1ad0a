"""Lesson 1 in Chinese, in a real browser: JupyterLab in Chinese (its language pack), the
Chinese notebook run, a slider moved, a Chinese readout that changes, drawn with a CJK font."""

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from tests.browser.conftest import lab_user_settings
from tests.browser.helpers import (_RUN_RESULT_JS, _wait_for_idle_kernel, find_slider,
                                   open_notebook, save_screenshot, set_slider_by_readout,
                                   wait_for_text_change)

LESSON = "chapters/01_attention_cues/lesson.zh-CN.ipynb"
CHINESE_INTERFACE = {"@jupyterlab/translation-extension/plugin.jupyterlab-settings":
                     {"locale": "zh_CN"}}


@pytest.fixture
def jupyter_lab_zh(jupyter_lab):
    """The session's JupyterLab with its interface in Chinese while the test runs (a page loaded
    then is in Chinese; the setting is restored after, and ``lab_page`` keeps its English page)."""
    with lab_user_settings(jupyter_lab, CHINESE_INTERFACE):
        yield jupyter_lab


def run_all_cells_by_command(page, timeout_ms=120_000):
    """Clear and run every cell through JupyterLab's commands (menu labels are Chinese here)."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    try:
        result = page.wait_for_function(_RUN_RESULT_JS, timeout=timeout_ms, polling=100).json_value()
    except PlaywrightTimeoutError:
        raise AssertionError(f"Run All Cells did not finish within {timeout_ms / 1000:.0f} s") from None
    assert not result["errors"], f"a cell raised: {result['errors']}"
    _wait_for_idle_kernel(page, timeout_ms)


def platform_fonts(page, selector: str) -> list[str]:
    """The fonts Chromium really drew the element's text with (DevTools' CSS domain)."""
    client = page.context.new_cdp_session(page)
    client.send("DOM.enable")
    client.send("CSS.enable")
    root = client.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = client.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    assert node, f"no element {selector!r}"
    fonts = client.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return [font["familyName"] for font in fonts if font["glyphCount"] > 0]


@pytest.mark.browser
def test_lesson_01_in_chinese_moves_a_chinese_readout(jupyter_lab_zh, browser_page,
                                                      console_errors, artifacts_dir):
    page = browser_page
    open_notebook(page, jupyter_lab_zh.base_url, LESSON)
    # The interface speaks Chinese: the menu bar's File menu is 文件.
    expect(page.locator(".lm-MenuBar-itemLabel", has_text="文件")).to_have_count(1)
    run_all_cells_by_command(page)

    readout = page.locator(".explorer-readout")
    expect(readout).to_have_count(1)
    text = readout.inner_text()
    assert "权重：[0.00, 1.00, 0.00, 0.00]" in text, text
    set_slider_by_readout(page, find_slider(page, "查询分量 3"), 10)
    text = wait_for_text_change(readout, text)
    assert "权重：[0.00, 0.33, 0.33, 0.33]" in text, text

    fonts = platform_fonts(page, ".explorer-readout")
    assert any("CJK" in family for family in fonts), \
        f"the Chinese readout was drawn with {fonts}, no CJK font (install fonts-noto-cjk)"
    heading = page.locator(".jp-RenderedMarkdown h1").first
    assert any("\u4e00" <= ch <= "\u9fff" for ch in heading.inner_text()), heading.inner_text()

    readout.scroll_into_view_if_needed()
    shot = save_screenshot(page, artifacts_dir, "lesson_01_zh_after_slider")
    assert shot.stat().st_size > 10_000
    console_errors.assert_none()
