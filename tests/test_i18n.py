"""The Chinese course kept in step with the English source (utils/i18n).

Every committed twin (``chapters/NN_*/lesson.zh-CN.ipynb``, ``exercises.zh-CN.ipynb``) must be:
- translated throughout: each piece of its English notebook has a current (not fuzzy) entry in
  its catalog, with the English's numbers, inline code, math, link targets and format fields;
- what the build produces from the English notebook and the catalog, cell for cell;
- the English code up to comments and strings, printing the same numbers;
- in d2l-zh's terms (utils/locale/zh-CN/glossary.tsv), each shown once with its English;
- free of English prose.
Strict nbval runs the twins themselves (Makefile). The catalog mechanics (a changed English
paragraph turns fuzzy, a changed number is caught) are tried on copies.
"""

import csv
import pathlib
import re
import shutil
import warnings

import nbformat
import polib
import pytest

from conftest import REPO
from utils.i18n import _, current_language, set_language
from utils.i18n.build import build, sources
from utils.i18n.catalogs import (CHINESE, INLINE_CODE, MATH, catalog_path, entry_kind,
                                 problems, translated_path, update)
from utils.i18n.segments import MARKDOWN, code_skeleton, notebook_pieces

ENGLISH_NOTEBOOKS = sorted(list((REPO / "chapters").glob("*/lesson.ipynb"))
                           + list((REPO / "chapters").glob("*/exercises.ipynb")))
TWINS = [nb for nb in ENGLISH_NOTEBOOKS if translated_path(nb).is_file()]
GLOSSARY = REPO / "utils" / "locale" / CHINESE / "glossary.tsv"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
ENGLISH_RUN = re.compile(r"\b[A-Za-z][A-Za-z'-]+(?:[ ,;:]+[A-Za-z][A-Za-z'-]+){3,}")


def name(notebook: pathlib.Path) -> str:
    return f"{notebook.parent.name}/{notebook.name}"


def glossary() -> list[dict]:
    lines = [line for line in GLOSSARY.read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


def term_pattern(english: str) -> re.Pattern:
    """The term in running English: any case, a plural, "dot product" or "dot-product"."""
    words = [re.escape(word) for word in re.split(r"[- ]", english)]
    return re.compile(r"(?<![\w-])" + "[-‐ ]?".join(words) + r"(?:s|es)?(?![\w-])", re.I)


def prose_of(markdown: str) -> str:
    """Markdown without its inline code and math (a `temperature=1.0` argument is no term)."""
    return MATH.sub(" ", INLINE_CODE.sub(" ", markdown))


def test_every_english_notebook_has_a_catalog():
    missing = [name(nb) for nb in ENGLISH_NOTEBOOKS if not catalog_path(nb).is_file()]
    assert not missing, f"no catalog (python -m utils.i18n update): {missing}"


def test_twins_exist():
    """The twins this suite checks (the README's lesson map says which lessons have one)."""
    assert TWINS, "no Chinese notebook is committed"


@pytest.fixture(params=TWINS, ids=name)
def twin(request):
    return request.param


def test_catalog_translates_the_current_english(twin):
    found = problems(twin)
    assert not found, f"{len(found)} problem(s):\n" + "\n".join(found[:30])


def test_committed_twin_is_what_the_build_produces(twin):
    committed = nbformat.read(translated_path(twin), as_version=4)
    built = build(twin)
    assert len(committed.cells) == len(built.cells)
    for index, (mine, theirs) in enumerate(zip(sources(committed), sources(built))):
        assert mine == theirs, (f"cell {index} differs from the build; run "
                                f"python -m utils.i18n build --execute {twin.relative_to(REPO)}")
    assert committed.metadata["attention_course"] == {"language": CHINESE,
                                                      "source": twin.name}


def test_code_cells_equal_the_english_up_to_comments_and_strings(twin):
    english = nbformat.read(twin, as_version=4)
    chinese = nbformat.read(translated_path(twin), as_version=4)
    for index, (en, zh) in enumerate(zip(english.cells, chinese.cells)):
        assert en.cell_type == zh.cell_type, f"cell {index}: kind differs"
        if en.cell_type == "code":
            assert code_skeleton(en.source) == code_skeleton(zh.source), \
                f"cell {index}: the code differs beyond comments and strings"


def printed_numbers(cell) -> list[str]:
    text = ""
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            text += output.text
        elif output.output_type in ("execute_result", "display_data"):
            text += output.get("data", {}).get("text/plain", "")
        elif output.output_type == "error":
            text += output.ename
    text = re.sub(r"0x[0-9a-fA-F]{6,}", "", text)
    return NUMBER.findall(text)


def test_code_cells_print_the_same_numbers(twin):
    english = nbformat.read(twin, as_version=4)
    chinese = nbformat.read(translated_path(twin), as_version=4)
    assert any(cell.get("outputs") for cell in chinese.cells if cell.cell_type == "code"), \
        "the twin is not executed"
    for index, (en, zh) in enumerate(zip(english.cells, chinese.cells)):
        if en.cell_type != "code" or "nbval-ignore-output" in en.metadata.get("tags", []):
            continue
        assert printed_numbers(en) == printed_numbers(zh), f"cell {index} prints other numbers"


def markdown_entries(twin) -> list[tuple[str, str]]:
    catalog = polib.pofile(str(catalog_path(twin)), wrapwidth=0)
    return [(entry.msgid, entry.msgstr) for entry in catalog if not entry.obsolete
            and entry.msgstr and entry_kind(entry) == MARKDOWN]


def test_terms_are_d2l_zh_terms(twin):
    wrong = []
    rows = [row for row in glossary() if row["checked"] == "yes"]
    for msgid, msgstr in markdown_entries(twin):
        if msgstr == msgid:
            continue                   # kept in English on purpose (a glossary's English column)
        for row in rows:
            accepted = [row["chinese"]] + [v for v in row["variants"].split("|") if v]
            if term_pattern(row["english"]).search(prose_of(msgid)) and not any(
                    form.lower() in msgstr.lower() for form in accepted):
                wrong.append(f"{row['english']!r} -> {row['chinese']!r} missing in {msgstr[:80]!r}")
    assert not wrong, f"{len(wrong)} entries miss d2l-zh's term:\n" + "\n".join(wrong[:30])


def test_the_first_use_of_a_term_shows_its_english(twin):
    chinese = nbformat.read(translated_path(twin), as_version=4)
    cells = [cell.source for cell in chinese.cells if cell.cell_type == "markdown"]
    missing = []
    for row in glossary():
        if row["checked"] != "yes" or row["chinese"] == row["english"]:
            continue
        first = next((text for text in cells if row["chinese"] in text), None)
        if first is not None and not term_pattern(row["english"]).search(first):
            missing.append(f"{row['chinese']} ({row['english']})")
    assert not missing, "first use without the English beside it: " + ", ".join(missing)


def english_prose(markdown: str) -> list[str]:
    """Runs of four or more English words left in translated Markdown, outside code, math,
    links and parenthesised glosses."""
    text = MATH.sub(" ", INLINE_CODE.sub(" ", markdown))
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)|https?://\S+", " ", text)
    text = re.sub(r"[（(][^（）()]*[)）]", " ", text)
    return ENGLISH_RUN.findall(text)


def test_every_translated_paragraph_reaches_the_twin(twin):
    """A translated piece whose English still stands in its cell of the twin was never applied
    (the build could not find it: mdpo read the cell otherwise than when it was extracted)."""
    chinese = nbformat.read(translated_path(twin), as_version=4)
    table = {msgid: msgstr for msgid, msgstr in markdown_entries(twin) if msgstr != msgid}
    english = nbformat.read(twin, as_version=4)
    flat = lambda text: " ".join(text.split())
    missed = []
    for piece in notebook_pieces(english):
        if piece.kind == MARKDOWN and piece.msgid in table and len(piece.msgid.split()) >= 3:
            if flat(piece.msgid) in flat(chinese.cells[piece.cell].source):
                missed.append(f"cell {piece.cell}: {piece.msgid[:70]!r}")
    assert not missed, f"translations the build did not apply: {missed[:10]}"


def test_no_english_prose_is_left(twin):
    chinese = nbformat.read(translated_path(twin), as_version=4)
    left = [run for cell in chinese.cells if cell.cell_type == "markdown"
            for run in english_prose(cell.source)]
    assert not left, f"English prose in the Chinese notebook: {left[:10]}"


# --- the mechanics, on copies -----------------------------------------------------------------------
@pytest.fixture
def scratch(tmp_path):
    """A copy of lesson 1 and its catalog, every piece given a (placeholder) translation."""
    source = REPO / "chapters" / "01_attention_cues" / "lesson.ipynb"
    notebook = tmp_path / "01_attention_cues" / "lesson.ipynb"
    notebook.parent.mkdir()
    shutil.copy(source, notebook)
    update(notebook)
    catalog = polib.pofile(str(catalog_path(notebook)), wrapwidth=0)
    for entry in catalog:
        markdown = entry_kind(entry) == MARKDOWN
        entry.msgstr = f"译：{entry.msgid}" if markdown else entry.msgid
    catalog.save(str(catalog_path(notebook)))
    assert problems(notebook) == []
    return notebook


def edit_first_paragraph(notebook: pathlib.Path, old: str, new: str) -> None:
    nb = nbformat.read(notebook, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and old in c.source)
    cell.source = cell.source.replace(old, new, 1)
    nbformat.write(nb, notebook)


def test_a_changed_english_paragraph_makes_its_translation_fuzzy(scratch):
    edit_first_paragraph(scratch, "what a *temperature* does to the weights",
                         "what a *temperature* does to the attention weights")
    path, counts = update(scratch)
    assert counts["fuzzy"] == 1 and counts["untranslated"] == 0, counts
    found = problems(scratch)
    assert len(found) == 1 and "fuzzy (the English changed)" in found[0], found
    entry = next(e for e in polib.pofile(str(path)) if e.fuzzy)
    assert "attention weights" in entry.msgid and "attention weights" not in entry.previous_msgid


def test_a_new_english_paragraph_has_no_translation(scratch):
    edit_first_paragraph(scratch, "**Prerequisites**", "A wholly new sentence.\n\n**Prerequisites**")
    update(scratch)
    found = problems(scratch)
    assert any("A wholly new sentence." in f and "no translation" in f for f in found), found


def retranslate(notebook: pathlib.Path, pattern: str, change) -> None:
    """Change the translation of the first Markdown entry whose English matches ``pattern``."""
    path = catalog_path(notebook)
    catalog = polib.pofile(str(path), wrapwidth=0)
    entry = next(e for e in catalog if entry_kind(e) == MARKDOWN
                 and re.search(pattern, e.msgid))
    entry.msgstr = change(entry.msgstr)
    catalog.save(str(path))


@pytest.mark.parametrize("pattern, change, complaint", [
    (r"softmax", lambda s: s.replace("softmax", "归一化指数", 1), None),   # words may change
    (r"^[^`$]*\b\d+\b[^`$]*$", lambda s: re.sub(r"\d+", "7", s, count=1) if not
     re.search(r"\b7\b", s) else re.sub(r"\d+", "8", s, count=1), "numbers differ"),
    (r"`[^`]+`", lambda s: s.replace("`", "", 2), "inline code differ"),
    (r"\$[^$]+\$", lambda s: s.replace("$", "", 2), "math differ"),
])
def test_a_translation_that_changes_numbers_code_or_math_is_caught(scratch, pattern, change,
                                                                   complaint):
    retranslate(scratch, pattern, change)
    found = problems(scratch)
    if complaint is None:
        assert found == []
    else:
        assert any(complaint in f for f in found), found


def test_a_code_string_must_stay_one_literal_with_its_fields():
    from utils.i18n.catalogs import entry_problems
    assert entry_problems("string", 'f"period {p:.1f} steps"', 'f"周期 {p:.1f} 步"') == []
    assert entry_problems("string", 'f"period {p:.1f}"', '"周期 {p:.1f}"')
    assert entry_problems("string", 'f"period {p:.1f}"', 'f"周期"')
    assert entry_problems("string", '"two words"', '两个词')
    assert entry_problems("comment", "# the weights", "# 权重") == []
    assert entry_problems("comment", "# the weights", "权重")


def test_a_figure_label_is_a_piece_even_as_one_word():
    """A reader reads ``xlabel="Keys"``, a panel's title and a legend's entries on the figure,
    so they are translated; other one-word strings (``cmap="Reds"``, ``fmts=("-", ...)``) are
    code, not prose, and stay as they are."""
    from utils.i18n.segments import code_pieces
    source = ('show_heatmaps(w, xlabel="Keys", ylabel = "Queries", cmap="Reds",\n'
              '              titles=["with", "without"])  # two panels\n'
              'plot(x, legend=[f"{n} {h}" for h in ("mean", "median")], fmts=("-", "m--"))\n'
              'ax.set(title="memory")  # the plot\nprint("mean")\n')
    assert [piece.msgid for piece in code_pieces(source, 0)] == [
        '"Keys"', '"Queries"', '"with"', '"without"', "# two panels", 'f"{n} {h}"', '"mean"',
        '"median"', '"memory"', "# the plot"]
    translated = source.replace('"Keys"', '"键"').replace('"Queries"', '"查询"')
    assert code_skeleton(translated) == code_skeleton(source)
    assert code_skeleton(source.replace('"Reds"', '"Blues"')) != code_skeleton(source)


# --- utils speaks the notebook's language --------------------------------------------------------------
def test_set_language_switches_utils_messages_and_rejects_unknown_languages(monkeypatch):
    monkeypatch.setattr("utils.i18n._language", "en")
    assert _("not a message the catalog holds") == "not a message the catalog holds"
    with pytest.raises(ValueError, match="'fr' is not one the course speaks; use one of"):
        set_language("fr")
    assert current_language() == "en"


def test_the_chinese_font_draws_chinese_without_missing_glyphs(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from utils.i18n.fonts import use_cjk_font
    monkeypatch.setattr(matplotlib, "rcParams", matplotlib.rcParams.copy())
    family = use_cjk_font()
    figure, axes = plt.subplots()
    axes.set_title("注意力权重（attention weights）−1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # "Glyph ... missing from font(s)" fails
        figure.canvas.draw()
    plt.close(figure)
    assert family == "Noto Sans CJK SC"


def test_utils_messages_have_current_translations():
    from utils.i18n import messages
    found = messages.problems()
    assert messages.source_messages(), "no _() message found in utils"
    assert not found, f"{len(found)} problem(s) in utils.po:\n" + "\n".join(found[:30])


def test_an_explorer_speaks_the_language_its_notebook_set(monkeypatch):
    from utils.widgets.attention_cues import AttentionCuesExplorer
    monkeypatch.setattr("utils.i18n._language", "en")
    english = AttentionCuesExplorer()
    set_language(CHINESE)
    try:
        chinese = AttentionCuesExplorer()
    finally:
        set_language("en")
    assert "weights: [0.00, 1.00, 0.00, 0.00]" in english.readout.value
    assert "权重：[0.00, 1.00, 0.00, 0.00]" in chinese.readout.value
    assert chinese.controls["q3"].description == "查询分量 3"
    assert english.controls["q3"].description == "query entry 3"


def test_make_lab_settings_choose_the_language_and_silence_the_news_prompt(tmp_path):
    import json
    from utils.i18n.lab import write_settings
    written = {p.name: json.loads(p.read_text()) for p in write_settings(tmp_path, CHINESE)}
    assert written["plugin.jupyterlab-settings"] == {"locale": "zh_CN"}
    assert written["notification.jupyterlab-settings"]["fetchNews"] == "false"
    with pytest.raises(SystemExit, match="'fr' is not one the course speaks"):
        write_settings(tmp_path, "fr")
