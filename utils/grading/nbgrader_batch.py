"""Several nbgrader commands in one Python process (``utils.grading.course.run_nbgrader_batch``).

Run as ``python -m utils.grading.nbgrader_batch <results.json> <commands JSON>``: each command
is an argument list for ``nbgrader`` (e.g. ``["generate_feedback", "01_attention_cues", ...]``),
run one after another by a fresh ``NbGraderApp``; after each, the exit statuses so far are
written to ``results.json`` (replaced whole), and ``MARKER`` is printed on stderr so that the
caller can tell each command's log lines apart. The batch stops at the first command that does
not exit 0. One process pays nbgrader's imports once (about 2.5 s of CPU) instead of once per
chapter.
"""

import json
import os
import sys

MARKER = "== utils.grading.nbgrader_batch: command finished =="


def _run_one(argv: list) -> int:
    """One nbgrader command in this process; its exit status (nbgrader exits 1 on failure)."""
    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp

    app = NbGraderApp.instance()
    try:
        app.initialize(argv)
        app.start()
        status = 0
    except NoStart:
        status = 0
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        app.reset()                       # logging handlers, sub-apps and the singleton
    return status


def _write_results(path: str, statuses: list) -> None:
    scratch = f"{path}.part"
    with open(scratch, "w", encoding="utf-8") as out:
        json.dump(statuses, out)
    os.replace(scratch, path)


def main(argv: list) -> int:
    if len(argv) != 2:
        print("usage: python -m utils.grading.nbgrader_batch <results.json> <commands JSON>",
              file=sys.stderr)
        return 2
    results, commands = argv[0], json.loads(argv[1])
    from utils.grading import alembic_head, skip_unused_schema_formats
    skip_unused_schema_formats()                          # as NBGRADER_MAIN (utils.grading)
    alembic_head.install()                                # a new gradebook: no `alembic` process
    statuses = []
    for command in commands:
        statuses.append(_run_one(list(command)))
        sys.stdout.flush()
        print(MARKER, file=sys.stderr, flush=True)
        _write_results(results, statuses)
        if statuses[-1] != 0:
            return statuses[-1]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
