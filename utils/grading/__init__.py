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


# Optional packages jsonschema imports only to check string formats ("iri", "uri", "date-time",
# "duration", "color", ...). No notebook or nbgrader schema asks for a format, and nothing else in
# these processes imports them (idna stays: requests needs it).
SCHEMA_FORMAT_PACKAGES = ("rfc3987_syntax", "rfc3986_validator", "rfc3339_validator", "isoduration",
                          "webcolors", "uri_template", "fqdn", "jsonpointer")


def skip_unused_schema_formats() -> None:
    """Make jsonschema's optional format packages look absent before nbformat/nbgrader import
    jsonschema: jsonschema then skips those format checks, which no schema of ours uses, and
    each instructor command, grading worker and nbgrader process saves their imports: 2 s of
    CPU for ``rfc3987_syntax``'s grammar, about 0.08 s for the others (``isoduration`` imports
    ``arrow``). No effect once jsonschema is imported."""
    if "jsonschema" not in sys.modules:
        for name in SCHEMA_FORMAT_PACKAGES:
            sys.modules.setdefault(name, None)


# ``python -m nbgrader`` with skip_unused_schema_formats() first (utils.grading.course).
# A new gradebook's schema revision is read in the process (utils.grading.alembic_head).
NBGRADER_MAIN = ("from utils.grading import skip_unused_schema_formats; skip_unused_schema_formats(); "
                 "from utils.grading import alembic_head; alembic_head.install(); "
                 "from nbgrader.apps.nbgraderapp import main; main()")
