"""Student content shown inert in every HTML page the grading tools write or serve.

A submission is written by someone else, and so is everything in it: markdown answers,
outputs, cell and notebook metadata, attachment names. The formgrader shows it on the Jupyter
server's own origin, where a running script could call the server's API with the instructor's
session, and the feedback pages are opened in browsers too. Two pieces make it inert:

- ``InertStudentContent``, an nbconvert preprocessor, rebuilds every cell from the fields the
  page templates read: outputs keep only plain text, images and sanitized HTML/markdown/LaTeX
  (never ``application/javascript`` or widget state), metadata keeps only nbgrader's grading
  fields with checked types, and notebook metadata (title, widgets) is replaced.
- ``markdown_to_inert_html``, the ``markdown2html`` filter of the page templates: markdown is
  rendered as usual (math is left as text for MathJax) and the resulting HTML is sanitized.

Sanitizing is done by nh3 (the Python binding of the Rust ``ammonia`` sanitizer): no
``<script>``, ``<style>``, ``<iframe>``, ``<object>``, ``<form>`` or ``<svg>``, no event-handler
or ``style`` attributes, no ``id``, no CSS class except syntax-highlighting ones, links only to
http(s)/mailto/fragments, images only as embedded ``data:image/...`` (never fetched from a
server). ``utils.grading.course.write_config`` turns both on for the formgrader and feedback.
"""

import html
import re

import nbformat
import nh3
from jinja2 import pass_context
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors import Preprocessor
from pygments.token import STANDARD_TYPES

# Tags and attributes: nh3's defaults (formatting, lists, tables, images, links) minus map/area.
_TAGS = set(nh3.ALLOWED_TAGS) - {"map", "area"}
_ATTRIBUTES = {tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()}
# Classes a stylesheet of the page may style: pygments' token classes on spans, "highlight"
# around code blocks. Every other class (bootstrap's "navbar-fixed-top", "modal", ...) is dropped,
# so student content cannot borrow the page's CSS to leave its box.
_ALLOWED_CLASSES = {"span": {name for name in STANDARD_TYPES.values() if name},
                    "div": {"highlight"}, "pre": {"highlight"}}
_IMAGE_DATA_URL = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*",
                             re.IGNORECASE)
_LINK = re.compile(r"(https?:|mailto:|#)", re.IGNORECASE)
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
_GRADE_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")
# Output types shown on the pages; the rest are listed as removed.
_SHOWN_TEXT = ("text/plain", "text/latex", "text/markdown")
_SHOWN_IMAGES = ("image/png", "image/jpeg")
_SVG = "image/svg+xml"     # shown only as <img src="data:..."> (scripts in it never run)
_NBGRADER_FLAGS = ("solution", "grade", "locked", "task")


def _filter_attribute(tag: str, attribute: str, value: str):
    """nh3 attribute hook: images only from embedded data, links only to safe targets."""
    bare = re.sub(r"[\x00-\x20]", "", value)
    if tag == "img" and attribute == "src":
        return value if _IMAGE_DATA_URL.fullmatch(bare) else None
    if tag == "a" and attribute == "href":
        return value if _LINK.match(bare) else None
    return value


def clean_html(text: str) -> str:
    """Sanitized HTML: formatting, tables, embedded images and plain links only."""
    return nh3.clean(str(text), tags=_TAGS, attributes=_ATTRIBUTES,
                     attribute_filter=_filter_attribute,
                     url_schemes={"http", "https", "mailto", "data"},
                     allowed_classes=_ALLOWED_CLASSES, strip_comments=True,
                     link_rel="noopener noreferrer nofollow")


@pass_context
def markdown_to_inert_html(context, source) -> str:
    """The templates' ``markdown2html``: markdown (with math and attachments) -> clean HTML."""
    cell = context.get("cell") or {}
    attachments = cell.get("attachments") if isinstance(cell, dict) else None
    renderer = IPythonRenderer(escape=False, attachments=attachments or {}, embed_images=False,
                               exclude_anchor_links=True)
    try:
        rendered = MarkdownWithMath(renderer=renderer).render(str(source))
    except Exception as error:   # noqa: BLE001 - e.g. a missing attachment: show the text
        return (f"<p><em>[markdown not rendered: {html.escape(type(error).__name__)}: "
                f"{html.escape(str(error))}]</em></p><pre>{html.escape(str(source))}</pre>")
    return clean_html(rendered)


def _text(value) -> str:
    """nbformat multiline strings (str or list of str) as one str; anything else -> ''."""
    if isinstance(value, list):
        return "".join(part for part in value if isinstance(part, str))
    return value if isinstance(value, str) else ""


def inert_output(output) -> nbformat.NotebookNode:
    """A new output holding only what the page may show of ``output``."""
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
        return nbformat.v4.new_output("stream", name=name, text=_text(output.get("text")))
    if kind == "error":
        traceback = output.get("traceback")
        return nbformat.v4.new_output(
            "error", ename=_text(output.get("ename")), evalue=_text(output.get("evalue")),
            traceback=[_text(line) for line in traceback] if isinstance(traceback, list) else [])
    data, removed = {}, []
    raw = output.get("data") if isinstance(output.get("data"), dict) else {}
    for mime, value in raw.items():
        text = _text(value)
        if mime == "text/html":
            data[mime] = clean_html(text)
        elif mime in _SHOWN_TEXT or mime == _SVG:
            data[mime] = text
        elif mime in _SHOWN_IMAGES and _BASE64.fullmatch(text):
            data[mime] = text
        else:
            removed.append(mime)
    if removed:
        note = f"[not shown on this page: {', '.join(sorted(map(str, removed)))}]"
        data["text/plain"] = (data.get("text/plain", "") + "\n" + note).strip()
    if kind == "execute_result":
        count = output.get("execution_count")
        return nbformat.v4.new_output("execute_result", data=data,
                                      execution_count=count if isinstance(count, int) else None)
    return nbformat.v4.new_output("display_data", data=data)


def _nbgrader_metadata(meta) -> dict:
    """nbgrader's cell fields with checked types (the templates print grade_id unescaped)."""
    if not isinstance(meta, dict):
        return {}
    clean = {flag: meta[flag] for flag in _NBGRADER_FLAGS if isinstance(meta.get(flag), bool)}
    grade_id = meta.get("grade_id")
    if isinstance(grade_id, str):
        clean["grade_id"] = grade_id if _GRADE_ID.fullmatch(grade_id) else "invalid-grade-id"
    for number in ("points", "score"):
        if isinstance(meta.get(number), (int, float)) and not isinstance(meta[number], bool):
            clean[number] = meta[number]
    for text in ("comment", "checksum", "schema_version", "cell_type"):
        if isinstance(meta.get(text), (str, int)):
            clean[text] = meta[text]
    return clean


def inert_cell(cell) -> nbformat.NotebookNode:
    """A new cell with the same visible content as ``cell`` and nothing that could run."""
    kind = cell.get("cell_type") if cell.get("cell_type") in ("code", "markdown") else "raw"
    source = _text(cell.get("source"))
    metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    clean_meta = {}
    if "nbgrader" in metadata:
        clean_meta["nbgrader"] = _nbgrader_metadata(metadata["nbgrader"])
    tags = metadata.get("tags")
    if isinstance(tags, list):
        clean_meta["tags"] = [tag for tag in tags if isinstance(tag, str)]
    if kind == "code":
        count = cell.get("execution_count")
        outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        new = nbformat.v4.new_code_cell(source, metadata=clean_meta,
                                        execution_count=count if isinstance(count, int) else None,
                                        outputs=[inert_output(o) for o in outputs
                                                 if isinstance(o, dict)])
    elif kind == "markdown":
        new = nbformat.v4.new_markdown_cell(source, metadata=clean_meta)
        attachments = cell.get("attachments")
        if isinstance(attachments, dict):
            kept = {name: {mime: _text(data) for mime, data in bundle.items()
                           if mime in (*_SHOWN_IMAGES, _SVG, "image/gif")}
                    for name, bundle in attachments.items()
                    if isinstance(name, str) and isinstance(bundle, dict)}
            if kept := {name: bundle for name, bundle in kept.items() if bundle}:
                new.attachments = kept
    else:
        new = nbformat.v4.new_raw_cell(html.escape(source), metadata=clean_meta)
    if isinstance(cell.get("id"), str) and _GRADE_ID.fullmatch(cell["id"]):
        new.id = cell["id"]
    return new


def inert_notebook_metadata(metadata) -> dict:
    """Notebook metadata the templates may read: a fixed kernel/language, nbgrader's own."""
    clean = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
             "language_info": {"name": "python"}}
    if isinstance(metadata, dict) and isinstance(metadata.get("nbgrader"), dict):
        clean["nbgrader"] = {key: value for key, value in metadata["nbgrader"].items()
                             if isinstance(value, (str, int, float, bool))}
    return clean


class InertStudentContent(Preprocessor):
    """HTML export preprocessor: every cell rebuilt by ``inert_cell``, metadata replaced."""

    def preprocess(self, nb, resources):
        nb.metadata = nbformat.from_dict(inert_notebook_metadata(nb.get("metadata")))
        nb.cells = [inert_cell(cell) for cell in nb.cells if isinstance(cell, dict)]
        return nb, resources
