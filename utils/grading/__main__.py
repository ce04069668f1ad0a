"""Entry point of ``python -m utils.grading``."""

from utils.grading.cli import main

raise SystemExit(main())
