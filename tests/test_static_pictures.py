"""Lessons read without a kernel: every explorer's committed output carries a static picture.

GitHub and nbviewer cannot render live widgets. An explorer's display carries a PNG of its
state and a text line beside the widget view; ``utils.notebook_tools.clean`` keeps them when it
drops the view, so the committed lesson shows the explorer's default state.
"""

import base64
import json

import nbformat
import pytest

from conftest import CHAPTERS
from utils.notebook_tools import WIDGET_VIEW, clean

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def explorer_cells():
    """(lesson, cell index, cell) of every lesson cell that builds an explorer."""
    for path in sorted(CHAPTERS.glob("*/lesson.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for index, cell in enumerate(nb["cells"]):
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and "Explorer(" in source:
                yield path.parent.name, index, cell


@pytest.mark.parametrize("lesson, index, cell", list(explorer_cells()),
                         ids=lambda value: str(value) if not isinstance(value, dict) else "")
def test_committed_explorer_output_has_a_picture(lesson, index, cell):
    pictures = [out["data"]["image/png"] for out in cell.get("outputs", [])
                if "image/png" in out.get("data", {})]
    assert pictures, f"{lesson} cell {index}: no static picture; re-execute with make notebooks"
    assert base64.b64decode(pictures[-1])[:8] == PNG_MAGIC
    assert not any(WIDGET_VIEW in out.get("data", {}) for out in cell.get("outputs", []))


def test_there_are_explorers_to_check():
    assert len(list(explorer_cells())) >= 9


def test_explorer_display_carries_picture_and_text():
    import torch
    from utils.widgets.attention_cues import AttentionCuesExplorer

    keys = torch.tensor([[10., 0, 0], [0, 10, 0], [0, 0, 10]])
    values = torch.tensor([[1., 0], [10, 0], [100, 5]])
    explorer = AttentionCuesExplorer(keys, values, query=(0.0, 10.0, 0.0))
    bundle = explorer.widget._repr_mimebundle_()
    assert WIDGET_VIEW in bundle
    assert base64.b64decode(bundle["image/png"])[:8] == PNG_MAGIC
    assert bundle["text/plain"].startswith("Interactive explorer")
    assert "<" not in bundle["text/plain"]


def test_clean_keeps_pictures_and_drops_views():
    picture = nbformat.v4.new_output("display_data", data={
        WIDGET_VIEW: {"model_id": "a"}, "image/png": "iVBORw0KGgo=", "text/plain": "state"})
    bare = nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "b"},
                                                        "text/plain": "VBox(...)"})
    text = nbformat.v4.new_output("stream", name="stdout", text="hello\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x", outputs=[picture, bare, text])])
    nb.metadata["widgets"] = {"state": {}}
    outputs = clean(nb).cells[0].outputs
    assert [sorted(out.get("data", {})) for out in outputs] == [["image/png", "text/plain"], []]
    assert "widgets" not in nb.metadata
