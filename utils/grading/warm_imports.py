"""Which modules a sandbox template imports before any student code: those the locked setup
cells of the released notebooks import (read by the pool's process and by each worker)."""

import ast
import json
import pathlib


def setup_imports(release_path: str) -> tuple:
    """Modules the release notebook's locked setup cells import (warmed up in the template)."""
    try:
        cells = json.loads(pathlib.Path(release_path).read_text())["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return ()
    names = []
    for cell in cells:
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        if cell.get("cell_type") != "code" or not meta.get("locked") or meta.get("grade"):
            continue
        source = cell.get("source", "")
        try:
            tree = ast.parse("".join(source) if isinstance(source, list) else source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
    return tuple(dict.fromkeys(names))
