"""Graded exercises and the instructor workflow (release, collect, autograde, feedback, export).

Run ``python -m utils.grading --help`` for the instructor commands. Importing this package is
light: it does not import nbgrader or torch, so exercises can ask ``in_grading_mode()`` cheaply.
Test cells use ``utils.grading.checks`` for helpful failure messages.
"""

import os

# Set to "1" by `python -m utils.grading autograde` for every kernel it starts.
GRADING_ENV_VAR = "ATTENTION_COURSE_GRADING"
# Where the instructor's nbgrader course directory lives (see utils.grading.course).
COURSE_DIR_ENV_VAR = "ATTENTION_COURSE_GRADING_DIR"


def in_grading_mode() -> bool:
    """True while the autograder runs this code (lessons may skip slow demos then)."""
    return os.environ.get(GRADING_ENV_VAR, "") == "1"
