"""Entry point of ``python -m utils.grading``."""

from utils.grading import skip_unused_schema_formats

skip_unused_schema_formats()             # before the commands import nbformat (2 s less each)

from utils.grading.cli import main       # noqa: E402

raise SystemExit(main())
