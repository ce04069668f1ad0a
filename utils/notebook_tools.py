"""Maintainer tools: execute lesson notebooks in place and strip what should not be committed.

    python -m utils.notebook_tools execute chapters/01_attention_cues/lesson.ipynb
    python -m utils.notebook_tools check chapters/*/lesson.ipynb

Committed lessons keep their outputs (students read them on the web too) but no widget state,
no per-cell timing metadata, and no stale widget views (they only render in a live kernel).
"""

import argparse
import pathlib
import sys

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove widget state, execution timestamps and widget views (in place).

    A widget view only renders with a live kernel, so it is dropped; an explorer's output
    keeps the static picture it carries beside the view (see utils.widgets.base.ExplorerBox),
    other widget outputs (a bare "VBox(...)" text) are dropped whole.
    """
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            kept = []
            for out in cell.outputs:
                data = out.get("data", {})
                if WIDGET_VIEW in data:
                    if "image/png" not in data:
                        continue
                    del data[WIDGET_VIEW]
                kept.append(out)
            cell.outputs = kept
    return nb


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """What `check` reports: unexecuted or out-of-order cells, errors, saved widget state."""
    found = []
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    counts = [c.execution_count for c in code]
    if any(n is None for n in counts):
        found.append("some code cells were never executed")
    elif counts != list(range(1, len(counts) + 1)):
        found.append(f"cells were not executed once, top to bottom (counts {counts})")
    for cell in code:
        tags = cell.metadata.get("tags", [])
        if "raises-exception" not in tags and any(o.output_type == "error" for o in cell.outputs):
            found.append(f"cell {cell.get('id')} has an error output")
    if "widgets" in nb.metadata:
        found.append("saved widget state in metadata")
    return found


def execute(path: pathlib.Path, timeout: int = 900) -> None:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(clean(nb), path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["execute", "clean", "check"])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    args = parser.parse_args(argv)
    status = 0
    for path in args.notebooks:
        if args.command == "execute":
            execute(path)
            print(f"executed {path}")
        elif args.command == "clean":
            nbformat.write(clean(nbformat.read(path, as_version=4)), path)
        else:
            for problem in problems(nbformat.read(path, as_version=4)):
                print(f"{path}: {problem}")
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
