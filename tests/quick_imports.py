"""A pytest plugin that makes jsonschema's optional format packages (``rfc3987_syntax`` and the
others ``utils.grading.SCHEMA_FORMAT_PACKAGES`` names) look absent before nbval imports nbformat
(and nbformat jsonschema): jsonschema then skips those format checks, which no notebook schema
uses, and each pytest process saves the 2-4 s of CPU ``rfc3987_syntax`` spends building its
grammar at import (``utils.grading.skip_unused_schema_formats``, which this calls, does the same
for the grader's processes). Loaded early with ``-p tests.quick_imports`` (the Makefile's
``NBVAL_FLAGS``, ``tests.benchmarks.bench_course``)."""

from utils.grading import skip_unused_schema_formats

skip_unused_schema_formats()
