"""A student install (``pip install -e .``, no ``instructor`` extra) runs every lesson's imports.

The instructor's packages (nbgrader, nh3, psycopg2) are made unimportable in a fresh Python, as
if they were not installed; then every ``utils`` module that a lesson or an exercise notebook
imports is imported, and the instructor command says which extra it needs.
"""

import json
import re
import subprocess
import sys

import tomllib

from conftest import CHAPTERS, REPO

INSTRUCTOR_ONLY = ("nbgrader", "nh3", "psycopg2")
# Run first in the child Python: any import of an instructor-only package fails as if missing.
BLOCKER = f"""
import sys
class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {INSTRUCTOR_ONLY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""
IMPORT = re.compile(r"^\s*(?:from\s+(utils(?:\.\w+)*)\s+import|import\s+(utils(?:\.\w+)*))", re.M)


def notebook_imports() -> set:
    """Every ``utils`` module imported by a lesson or exercise notebook."""
    modules = set()
    for path in CHAPTERS.glob("*/*.ipynb"):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                for match in IMPORT.finditer("".join(cell["source"])):
                    modules.add(match.group(1) or match.group(2))
    return modules


def run_blocked(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + code], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_core_dependencies_leave_out_the_instructor_tools():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    instructor = " ".join(project["optional-dependencies"]["instructor"])
    for package in ("nbgrader", "nh3", "psycopg2-binary"):
        assert package not in core and package in instructor


def test_every_notebook_import_works_without_the_instructor_extra():
    modules = sorted(notebook_imports())
    assert "utils.grading" in modules and len(modules) >= 10   # the scan found the imports
    result = run_blocked("import importlib\n"
                         f"for name in {modules!r}:\n"
                         "    importlib.import_module(name)\n"
                         "from utils.grading import checks, in_grading_mode\n"
                         "print('imported', len(set(sys.modules)))")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "imported" in result.stdout


def test_the_blocker_really_blocks():
    result = run_blocked("import nbgrader")
    assert result.returncode != 0 and "No module named 'nbgrader'" in result.stderr


def test_instructor_command_names_the_extra():
    result = run_blocked("from utils.grading.cli import main\nraise SystemExit(main(['--help']))")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pip install -e '.[instructor]'" in result.stderr
