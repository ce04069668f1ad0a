"""Graded exercises and the instructor workflow (release, collect, autograde, feedback, export).

Run ``python -m utils.grading --help`` for the instructor commands. Importing this package is
light: it does not import nbgrader or torch, so exercises can ask ``in_grading_mode()`` cheaply.
Test cells use ``utils.grading.checks`` for helpful failure messages.
"""

import os
import sys

# Set to "1" by `python -m utils.grading autograde` for every kernel it starts.
GRADING_ENV_VAR = "ATTENTION_COURSE_GRADING"
# Where the instructor's nbgrader course directory lives (see utils.grading.course).
COURSE_DIR_ENV_VAR = "ATTENTION_COURSE_GRADING_DIR"


def in_grading_mode() -> bool:
    """True while the autograder runs this code (lessons may skip slow demos then)."""
    return os.environ.get(GRADING_ENV_VAR, "") == "1"


def skip_unused_schema_formats() -> None:
    """Make the optional ``rfc3987_syntax`` package look absent before nbformat/nbgrader import
    jsonschema: jsonschema then skips its "iri" format check (no notebook or nbgrader schema
    uses it), and each instructor command and nbgrader process saves the 2 s of CPU the package
    needs to build its grammar at import. No effect once jsonschema is imported."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


# ``python -m nbgrader`` with skip_unused_schema_formats() first (utils.grading.course).
# A new gradebook's schema revision is read in the process (utils.grading.alembic_head).
NBGRADER_MAIN = ("import sys; sys.modules.setdefault('rfc3987_syntax', None); "
                 "from utils.grading import alembic_head; alembic_head.install(); "
                 "from nbgrader.apps.nbgraderapp import main; main()")
