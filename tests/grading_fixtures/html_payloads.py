"""Hostile student content for the grading pages: a family of HTML/JavaScript payloads.

Every payload, if it ever ran, would do three visible things: set ``document.title`` to
``PWNED ...``, set ``window.pwned``, and request ``/pwned-<name>`` from the page's server. The
tests assert that none of this happens (browser) and that none of the payloads' dangerous
elements or attributes reach the HTML (parser).
"""

import base64

import nbformat

MARKER = "pwned"


def js(name: str) -> str:
    """The JavaScript each payload runs (single quotes only, so it fits in attributes)."""
    return (f"document.title='PWNED {name}';window.pwned='{name}';"
            f"fetch('/{MARKER}-{name}')")


# Markdown answers: raw HTML inside markdown, links, SVG, frames, forms, CSS.
MARKDOWN_PAYLOADS = {
    "md-script": f"<script>{js('md-script')}</script>",
    "md-onerror": f'<img src="x" onerror="{js("md-onerror")}">',
    "md-js-link": f"[click me](javascript:{js('md-js-link')})",
    "md-js-href": f'<a href="jav&#x09;ascript:{js("md-js-href")}">click</a>',
    "md-svg-script": f"<svg><script>{js('md-svg-script')}</script></svg>",
    "md-svg-onload": f'<svg onload="{js("md-svg-onload")}"><circle r="5"/></svg>',
    "md-iframe": f'<iframe srcdoc="<script>parent.{js("md-iframe")}</script>"></iframe>',
    "md-object": f'<object data="/{MARKER}-md-object"></object><embed src="/{MARKER}-md-embed">',
    "md-form": f'<form action="/{MARKER}-md-form" method="post"><button>send</button></form>',
    "md-details": f'<details open ontoggle="{js("md-details")}"><summary>s</summary></details>',
    "md-css": ('<style>body{display:none}</style>'
               '<div class="navbar-fixed-top modal" style="position:fixed;top:0;left:0;'
               'width:100%;height:100%;z-index:9999;background:red">COVER</div>'),
    "md-remote-image": f"![tracker](http://127.0.0.1:9/{MARKER}-md-remote-image.png)",
}
# What must still render: formatting, math (left as text for MathJax), tables, code.
HARMLESS_MARKDOWN = ("Visible answer: **softmax** keeps $\\frac{1}{\\sqrt{d}}$ scores small "
                     "because $q^\\top k$ grows with $d$.\n\n| d | var |\n|---|---|\n| 4 | 4 |\n")

# Code that a student answer cell runs at grading time: outputs of every risky MIME type.
DISPLAY_CODE = f'''\
from IPython.display import display, HTML, SVG, Javascript, Markdown, Latex
display(HTML("<b>html-output</b><script>{js('out-html-script')}</script>"
             "<img src=x onerror=\\"{js('out-html-onerror')}\\">"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="{js('out-svg-onload')}">'
            '<script>{js('out-svg-script')}</script><circle r="4"/></svg>'))
display(Javascript("{js('out-javascript')}"))
display(Markdown("<script>{js('out-markdown')}</script>markdown-output"))
display(Latex("$x$<script>{js('out-latex')}</script>"))
'''


def attachment_cell() -> nbformat.NotebookNode:
    """A markdown cell whose attachment name and MIME key carry HTML."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    cell = nbformat.v4.new_markdown_cell(
        '![a](attachment:a.png) ![b](attachment:b"><script>x</script>.png)')
    cell.attachments = {
        "a.png": {f'image/png" onerror="{js("attachment-mime")}': png},
        'b"><script>x</script>.png': {"image/png": png},
    }
    return cell


def output_payloads() -> list:
    """Outputs as a notebook could carry them (the grading pipeline would not produce all)."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    return [
        nbformat.v4.new_output("display_data", data={
            "text/html": f"<script>{js('nb-html-script')}</script><b>nb-html</b>",
            "text/plain": "nb-html"}),
        nbformat.v4.new_output("display_data", data={
            "image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" '
                             f'onload="{js("nb-svg")}"><script>{js("nb-svg-script")}</script></svg>'}),
        nbformat.v4.new_output("display_data", data={
            "application/javascript": js("nb-javascript"), "text/plain": "nb-js"}),
        nbformat.v4.new_output("display_data", data={
            "text/markdown": f"<img src=x onerror=\"{js('nb-markdown')}\">"}),
        nbformat.v4.new_output("display_data", data={
            "text/latex": f"<script>{js('nb-latex')}</script>"}),
        nbformat.v4.new_output("display_data", data={
            "image/png": f'{png}"><script>{js("nb-png")}</script>'},
            metadata={"filenames": {"image/png": f"javascript:{js('nb-filename')}"}}),
        nbformat.v4.new_output("display_data", data={
            "application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2,
                                                         "version_minor": 0}}),
    ]


def hostile_notebook(base: nbformat.NotebookNode = None,
                     grade_id_payload: bool = True) -> nbformat.NotebookNode:
    """``base`` (default: empty) plus every payload: markdown, outputs, metadata, attachments.

    ``grade_id_payload``: also an nbgrader cell whose grade_id carries HTML (the gradebook has
    no such cell, so nbgrader's feedback step cannot look it up: page templates only)."""
    nb = nbformat.from_dict(base) if base is not None else nbformat.v4.new_notebook()
    nb = nbformat.from_dict(nbformat.reads(nbformat.writes(nb), as_version=4))   # deep copy
    nb.metadata["title"] = f"</title><script>{js('nb-title')}</script>"
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"m1": {"model_module": f"{MARKER}-evil-npm-module", "model_module_version": "1",
                         "model_name": "Evil", "state": {}}}, "version_major": 2,
        "version_minor": 0}}
    markdown = nbformat.v4.new_markdown_cell(
        HARMLESS_MARKDOWN + "\n\n" + "\n\n".join(MARKDOWN_PAYLOADS.values()))
    markdown.metadata["tags"] = [f'"><script>{js("tag")}</script>']
    code = nbformat.v4.new_code_cell("print('hi')", execution_count=1,
                                     outputs=output_payloads())
    if grade_id_payload:
        code.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False,
                                     "grade_id": f'x"><script>{js("grade-id")}</script>',
                                     "schema_version": 3}
    nb.cells.extend([markdown, attachment_cell(), code])
    return nb
