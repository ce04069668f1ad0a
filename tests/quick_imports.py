"""A pytest plugin that makes the optional ``rfc3987_syntax`` package look absent before nbval
imports nbformat (and nbformat jsonschema): jsonschema then skips the "iri" format check, which
no notebook schema uses, and each pytest process saves the 2-4 s of CPU the package spends
building its grammar at import (``utils.grading.skip_unused_schema_formats`` does the same for
the grader's processes). Loaded early with ``-p tests.quick_imports`` (the Makefile's
``NBVAL_FLAGS``, ``tests.benchmarks.bench_course``)."""

import sys

if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)
