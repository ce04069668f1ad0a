"""Rebuild a submission on the trusted structure of the assignment.

The graded notebook always has the cells of the released assignment, in its order: locked
cells and test cells (with their hidden tests) come from the instructor's ``source/`` copy,
answer cells from the student (matched by nbgrader ``grade_id``), and the student's own extra
cells stay after the answer cell they followed. So a submission with deleted, duplicated,
reordered or retyped cells, changed cell ids or broken JSON is still graded against the same
tests, and every deviation is written down as a note for the instructor and the student.
"""

import copy
import json

import nbformat

MAX_NOTEBOOK_BYTES = 20 * 2 ** 20


class Unreadable(ValueError):
    """The submission is not a notebook we can read; the message says why."""


def grade_id(cell):
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    value = nbg.get("grade_id") if isinstance(nbg, dict) else None
    return value if isinstance(value, str) else None


def _is_solution(cell) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))


def _source_text(cell) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise Unreadable("a cell's source is neither text nor a list of lines")


def read_student_cells(raw: bytes) -> list:
    """The submission's cells as dicts with a text source; raises Unreadable with the reason."""
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raise Unreadable(f"the file is larger than {MAX_NOTEBOOK_BYTES // 2 ** 20} MB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise Unreadable(f"the file is not valid notebook JSON ({type(error).__name__}: "
                         f"{str(error)[:200]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise Unreadable("the file is JSON but not a notebook (no list of cells)")
    cells = []
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            continue                   # not a cell; nothing of it can be graded
        metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        cells.append({"cell_type": cell["cell_type"], "source": _source_text(cell),
                      "metadata": metadata})
    return cells


def _free_cell(cell: dict, index: int):
    """A cell the student added (or one we cannot match): kept, without nbgrader metadata."""
    metadata = {k: v for k, v in cell["metadata"].items() if k in ("tags", "collapsed")}
    maker = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
             "raw": nbformat.v4.new_raw_cell}[cell["cell_type"]]
    new = maker(cell["source"], metadata=metadata)
    new["id"] = f"student-cell-{index}"
    return new


def normalize(raw: bytes, source_nb, release_nb):
    """(graded notebook, notes, unreadable reason or None) for the submitted bytes ``raw``.

    ``source_nb``: the instructor version in ``<course>/source/`` (trusted, hidden tests);
    ``release_nb``: the student version handed out (the answer stubs).
    """
    notes = []
    try:
        cells = read_student_cells(raw)
        unreadable = None
    except Unreadable as error:
        cells, unreadable = [], str(error)
    sources = {grade_id(c): c for c in source_nb.cells if grade_id(c)}
    stubs = {grade_id(c): c for c in release_nb.cells if grade_id(c)}
    answers, free, anchor, seen = {}, {None: []}, None, set()
    for index, cell in enumerate(cells):
        gid = grade_id(cell)
        if gid in stubs and gid not in seen:
            seen.add(gid)
            anchor = gid
            free.setdefault(gid, [])
            if _is_solution(stubs[gid]):
                if cell["cell_type"] == stubs[gid].cell_type:
                    answers[gid] = cell
                else:
                    notes.append(f"answer cell {gid} was changed from {stubs[gid].cell_type} "
                                 f"to {cell['cell_type']}; graded as not answered")
            continue
        if gid in stubs:
            notes.append(f"cell {gid} appears more than once; the first copy was graded, "
                         f"the others ran as ordinary cells")
        free.setdefault(anchor, []).append(_free_cell(cell, index))

    graded = nbformat.v4.new_notebook(metadata=copy.deepcopy(source_nb.metadata))
    graded.cells.extend(free[None])
    for stub in release_nb.cells:
        gid = grade_id(stub)
        if not gid:
            continue                   # the release's own free cells: the student's count
        if _is_solution(stub):
            cell = copy.deepcopy(stub)
            if gid in answers:
                cell.source = answers[gid]["source"]
            elif not unreadable and not any(gid in n for n in notes):
                notes.append(f"answer cell {gid} is missing; graded as not answered")
        else:
            cell = copy.deepcopy(sources.get(gid, stub))
            if gid not in seen and not unreadable and stub.metadata.nbgrader.get("grade"):
                notes.append(f"test cell {gid} was missing; the original was restored and run")
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        graded.cells.append(cell)
        graded.cells.extend(free.get(gid, []))
    if unreadable:
        notes.insert(0, f"the submission could not be read: {unreadable}; it was graded as "
                        f"an empty notebook")
    return graded, notes, unreadable
