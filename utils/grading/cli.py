"""``python -m utils.grading <command>``: the instructor's workflow, one command per step.

    release    build student versions of a chapter's exercises (or all) into <course>/release/
    collect    copy a folder of submissions into <course>/submitted/ and the gradebook
    autograde  run every submission in a sandbox, tests outside it, in parallel
    feedback   HTML per student, without the code of hidden tests
    export     CSV, one row per student: per graded cell (nbgrader), or for Canvas or Moodle
    init       only write <course>/nbgrader_config.py
    rebuild-gradebook  a new gradebook from the submissions and the grader's results
               (after a damaged one was reported)
    table      every lesson's exercises: kind, strict reading, bug class, points and named
               checks (markdown)
    lab        open JupyterLab in the course directory (formgrader: manual grading)
"""

import argparse
import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

from utils.grading import COURSE_DIR_ENV_VAR
from utils.grading import course as course_mod
from utils.grading import diskfull, integrity
from utils.grading.courselock import CourseLock


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course-dir", help=f"nbgrader course directory (default: "
                        f"${COURSE_DIR_ENV_VAR} or {course_mod.DEFAULT_COURSE_DIR})")
    common.add_argument("--db-url", help="gradebook sqlalchemy URL (default: sqlite "
                        "gradebook.db in the course directory)")
    common.add_argument("--course-id", help=f"nbgrader course id (default: "
                        f"{course_mod.DEFAULT_COURSE_ID})")
    common.add_argument("--quiet", action="store_true", help="hide nbgrader's log")
    return common


def _execution_options() -> argparse.ArgumentParser:
    execution = argparse.ArgumentParser(add_help=False)
    execution.add_argument("--timeout", type=int, help=f"seconds per cell before the kernel "
                           f"is interrupted (default {course_mod.DEFAULT_TIMEOUT})")
    execution.add_argument("--memory-mb", type=int, help=f"address-space limit of each "
                           f"grading kernel in MB (default {course_mod.DEFAULT_MEMORY_MB})")
    return execution


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m utils.grading", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    common, execution = _common_options(), _execution_options()
    chapter_help = "chapter number (01), folder name (01_attention_cues) or 'all'"

    init = commands.add_parser("init", parents=[common, execution],
                               help="write nbgrader_config.py in the course directory")
    init.set_defaults(run=cmd_init)

    table = commands.add_parser("table", help="print every lesson's exercises: kind, points "
                                "and named checks, and flag rule breaks")
    table.set_defaults(run=cmd_table)

    release = commands.add_parser("release", parents=[common, execution],
                                  help="generate student versions into <course>/release/")
    release.add_argument("--chapter", default="all", help=chapter_help + " (default all)")
    release.add_argument("--language", default="en", choices=course_mod.LANGUAGES,
                         help="the language students read: en (exercises.ipynb, the default) or "
                         "zh-CN (exercises.zh-CN.ipynb); the same code earns the same points")
    release.set_defaults(run=cmd_release)

    collect = commands.add_parser("collect", parents=[common],
                                  help="copy submissions into <course>/submitted/")
    collect.add_argument("folder", help="<student_id>.ipynb files, or nbgrader's "
                         "submitted/<student>/<assignment>/ layout")
    collect.add_argument("--chapter", required=True, help=chapter_help.replace(" or 'all'", ""))
    collect.set_defaults(run=cmd_collect)

    autograde = commands.add_parser("autograde", parents=[common, execution],
                                    help="execute and score the collected submissions")
    autograde.add_argument("--chapter", default="all", help=chapter_help + " (default all)")
    autograde.add_argument("--student", help="only this student")
    autograde.add_argument("--force", action="store_true",
                           help="grade again submissions that were already autograded")
    autograde.add_argument("--workers", type=int, default=0,
                           help="submissions graded in parallel (default: number of CPU cores)")
    autograde.add_argument("--notebook-timeout", type=int, default=600,
                           help="seconds for a whole submission (default 600)")
    autograde.add_argument("--allow-read", action="append", default=[], metavar="PATH",
                           help="extra file or folder the student's code may read (read-only; "
                                "repeatable), e.g. a data set")
    autograde.add_argument("--allow-unsandboxed", action="store_true",
                           help="grade without bubblewrap if it is missing (student code then "
                                "runs with your permissions: only for trusted submissions)")
    autograde.add_argument("--timings", metavar="FILE",
                           help="write each graded submission's wall and CPU seconds per phase "
                                "(grading, gradebook record) to this JSON file")
    autograde.set_defaults(run=cmd_autograde)

    feedback = commands.add_parser("feedback", parents=[common],
                                   help="HTML feedback per student, hidden tests removed")
    feedback.add_argument("--chapter", default="all", help=chapter_help + " (default all)")
    feedback.add_argument("--student", help="only this student")
    feedback.set_defaults(run=cmd_feedback)

    export = commands.add_parser("export", parents=[common],
                                 help="CSV of scores per graded cell and total, or for an LMS")
    export.add_argument("--chapter", default="all", help=chapter_help + " (default all)")
    export.add_argument("--format", default="nbgrader",
                        help="nbgrader (default: one column per graded cell), canvas (gradebook "
                             "import CSV) or moodle (grade import CSV); one column per chapter "
                             "for canvas and moodle")
    export.add_argument("--to", help="CSV path (default <course>/grades.csv, or "
                        "grades-canvas.csv, grades-moodle.csv)")
    export.add_argument("--canvas-id-column", help="Canvas column the student id fills: "
                        "'SIS User ID' (default), 'SIS Login ID' or 'ID'")
    export.add_argument("--moodle-id-column", help="Moodle identifier column holding the "
                        "student id: 'ID number' (default), 'Username' or 'Email address'")
    export.set_defaults(run=cmd_export)

    rebuild = commands.add_parser(
        "rebuild-gradebook", parents=[common],
        help="a new gradebook from source/, submitted/ and the grader's results in .grading/ "
             "(the damaged SQLite file is kept aside)")
    rebuild.add_argument("--force", action="store_true",
                         help="rebuild even if the gradebook looks whole")
    rebuild.set_defaults(run=cmd_rebuild)

    lab = commands.add_parser("lab", parents=[common],
                              help="JupyterLab rooted at the course directory (formgrader)")
    lab.add_argument("lab_args", nargs=argparse.REMAINDER, help="passed to jupyter lab")
    lab.set_defaults(run=cmd_lab)
    return parser


def _settings(args) -> course_mod.CourseSettings:
    return course_mod.settings_for(args.course_dir, args.course_id, args.db_url,
                                   getattr(args, "timeout", None), getattr(args, "memory_mb", None))


def _error_lines(result) -> str:
    """nbgrader's ERROR log lines (only captured with --quiet), indented for a message."""
    lines = [line for line in (result.stderr or "").splitlines() if "| ERROR]" in line]
    return "".join("\n  " + line for line in lines[-10:])


def _nbgrader(settings, args, *command, extra_env=None) -> None:
    result = course_mod.run_nbgrader(settings, *command, quiet=args.quiet, extra_env=extra_env)
    _check_nbgrader(settings, args, command, result)


def _nbgrader_batch(settings, args, commands) -> list:
    """Run nbgrader ``commands`` in one process (``course.run_nbgrader_batch``); returns a
    callable per command that raises as ``_nbgrader`` would if that command failed."""
    results = course_mod.run_nbgrader_batch(settings, commands, quiet=args.quiet)
    results += [None] * (len(commands) - len(results))        # not run: an earlier one failed
    return [lambda command=command, result=result: _check_nbgrader(settings, args, command, result)
            for command, result in zip(commands, results)]


def _check_nbgrader(settings, args, command, result) -> None:
    if result is None:
        raise RuntimeError(f"nbgrader {' '.join(command)} did not run: an earlier command failed")
    if result.returncode != 0:
        full = "No space left on device" in (result.stderr or "") or \
            diskfull.free_bytes(settings.course_dir) < 2 ** 20
        if full:
            raise diskfull.DiskFull(diskfull.message(settings.course_dir,
                                                     f"python -m utils.grading {args.command}"))
        raise RuntimeError(f"nbgrader {' '.join(command)} failed (exit {result.returncode})"
                           + _error_lines(result))


@contextlib.contextmanager
def _exclusive(settings, args):
    """This command alone on the course directory (``courselock``), with a whole gradebook
    (``integrity``); the students it knows are kept for ``rebuild-gradebook``."""
    with CourseLock(settings.course_dir, args.command) as lock:
        if lock.note():
            print(lock.note(), file=sys.stderr)
        integrity.check(settings)
        yield lock
        from utils.grading.rebuild import save_roster
        save_roster(settings)


def _staged(settings, kind: str) -> pathlib.Path:
    """An empty scratch folder in the course for nbgrader's output, moved into place after."""
    folder = settings.course_dir / ".grading" / "staging" / kind
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def _move_into_place(staging: pathlib.Path, target: pathlib.Path) -> list:
    """Move every file under ``staging`` to the same place under ``target`` (renames on one
    disk: a file is replaced whole); returns the moved files' new paths."""
    import os
    moved = []
    for path in sorted(p for p in staging.rglob("*") if p.is_file()):
        destination = target / path.relative_to(staging)
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, destination)
        moved.append(destination)
    shutil.rmtree(staging, ignore_errors=True)
    return moved


def _released(settings, names) -> list:
    """The chosen assignments that have been released (error if none)."""
    released = [n for n in names if (settings.course_dir / "source" / n).is_dir()]
    if not released:
        raise ValueError(f"{', '.join(names)} not released in {settings.course_dir}; run "
                         f"python -m utils.grading release first")
    return released


def cmd_init(args) -> int:
    settings = _settings(args)
    course_mod.write_config(settings)
    print(f"course directory: {settings.course_dir}\n"
          f"config:           {settings.course_dir / course_mod.CONFIG_FILE}\n"
          f"gradebook:        {settings.db_url}")
    return 0


def cmd_table(args) -> int:
    from utils.grading import exercise_table
    chapters = course_mod.default_chapters_dir()
    print(exercise_table.markdown_table(chapters))
    broken = exercise_table.course_problems(chapters)
    for line in broken:
        print(f"rule broken: {line}", file=sys.stderr)
    return 1 if broken else 0


def cmd_release(args) -> int:
    settings = _settings(args)
    with _exclusive(settings, args):
        chapters = course_mod.resolve_chapters(args.chapter)
        # Each chapter's source first (its previous content kept, to put back if its release
        # fails); then nbgrader releases them all in one process, each into its own staging
        # folder, moved into place chapter by chapter.
        previous, stagings = {}, {}
        for chapter in chapters:
            source = settings.course_dir / "source" / chapter.name / course_mod.EXERCISES
            previous[chapter.name] = source.read_bytes() if source.is_file() else None
            source.parent.mkdir(parents=True, exist_ok=True)
            diskfull.atomic_write(source, course_mod.exercises_in(chapter, args.language)
                                  .read_bytes())
            stagings[chapter.name] = _staged(settings, f"release/{chapter.name}")
        released = []
        try:
            checks = _nbgrader_batch(settings, args, [
                ["generate_assignment", name, "--force",
                 f"--CourseDirectory.release_directory={staging}"]
                for name, staging in stagings.items()])
            for chapter, check in zip(chapters, checks):
                check()
                _move_into_place(stagings[chapter.name], settings.course_dir / "release")
                released.append(chapter.name)
                handout = settings.course_dir / "release" / chapter.name / course_mod.EXERCISES
                language = "" if args.language == "en" else f" ({args.language})"
                print(f"{chapter.name}: hand out {handout}{language}")
        finally:
            shutil.rmtree(settings.course_dir / ".grading" / "staging" / "release",
                          ignore_errors=True)
            for name, content in previous.items():        # not released: as it was before
                if name not in released:
                    _restore_source(settings, name, content)
    return 0


def _restore_source(settings, name: str, content) -> None:
    source = settings.course_dir / "source" / name / course_mod.EXERCISES
    if content is None:
        source.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            source.parent.rmdir()                         # only if nothing else is in it
    else:
        diskfull.atomic_write(source, content)


def cmd_collect(args) -> int:
    from utils.grading.collect import collect

    settings = _settings(args)
    names = course_mod.assignment_names(args.chapter)
    if len(names) != 1:
        raise ValueError("collect takes one chapter at a time, e.g. --chapter 01")
    with _exclusive(settings, args):
        report = collect(settings, args.folder, names[0])
    for student, message in report:
        print(f"{student}: {message}")
    skipped = sum(message.startswith("SKIPPED") for _, message in report)
    print(f"collected {len(report) - skipped}, skipped {skipped}"
          + (" (fix the files above and run collect again)" if skipped else ""))
    return 1 if skipped else 0


def cmd_autograde(args) -> int:
    from utils.grading import autograde as autograde_mod
    from utils.grading import sandbox

    settings = _settings(args)
    if args.workers < 0 or args.notebook_timeout <= 0:
        raise ValueError("--workers must be >= 0 (0 = one per CPU core) and --notebook-timeout "
                         "a positive number of seconds")
    names = _released(settings, course_mod.assignment_names(args.chapter))
    if not (settings.course_dir / "submitted").is_dir():
        raise ValueError(f"nothing collected in {settings.course_dir}; run "
                         f"python -m utils.grading collect first")
    sandboxed = True
    try:
        sandbox.check_bwrap()
    except sandbox.SandboxUnavailable as error:
        if not args.allow_unsandboxed:
            raise ValueError(f"{error}") from None
        print(f"WARNING: grading WITHOUT a sandbox: {error}", file=sys.stderr)
        sandboxed = False
    if sandboxed:
        sandbox.sandbox_uid(max(args.workers, os.cpu_count() or 1) - 1)   # a bad uid base: now
    options = autograde_mod.Options(
        workers=args.workers, force=args.force, student=args.student,
        cell_timeout=settings.timeout, notebook_timeout=args.notebook_timeout,
        memory_mb=settings.memory_mb, sandboxed=sandboxed,
        extra_read_only=tuple(args.allow_read), quiet=args.quiet)
    failed = []
    with _exclusive(settings, args) as lock:
        options.inherit_fds = (lock.fd,)       # held until the last worker is gone
        summaries = autograde_mod.autograde_all(settings, names, options)    # one pool for all
    if args.timings:
        diskfull.atomic_write(pathlib.Path(args.timings), json.dumps(
            {name: summary.phases for name, summary in summaries.items()}, indent=1).encode())
    full = False
    for name, summary in summaries.items():
        print(f"{name}: graded {len(summary.graded)}, skipped {len(summary.skipped)} already "
              f"graded, failed {len(summary.failed)} in {summary.seconds:.1f} s; autograded "
              f"notebooks in {settings.course_dir / 'autograded'}")
        for student, notes in sorted(summary.notes.items()):
            print(f"  {student}: " + "; ".join(notes))
        if summary.regraded:
            print(f"{name}: graded again from scratch after a crash that was not theirs: "
                  f"{len(summary.regraded)}")
            for student, reason in sorted(summary.regraded.items()):
                print(f"  {student}: {reason}")
        failed += [f"{name}/{student}: {reason}" for student, reason in summary.failed.items()]
        full = full or summary.disk_full
    if full:
        raise diskfull.DiskFull(diskfull.message(settings.course_dir,
                                                 "python -m utils.grading autograde"))
    if failed:
        print("not graded (run autograde again to retry them):\n  " + "\n  ".join(failed),
              file=sys.stderr)
    return 1 if failed else 0


def cmd_feedback(args) -> int:
    import nbformat
    from utils.grading.feedback import find_leaks, split_hidden

    settings = _settings(args)
    leaks = []
    with _exclusive(settings, args):
        names = _released(settings, course_mod.assignment_names(args.chapter))
        stagings = {name: _staged(settings, f"feedback/{name}") for name in names}
        try:
            # nbgrader writes every chapter's pages in one process, each into its own staging
            # folder; they are moved into place chapter by chapter.
            checks = _nbgrader_batch(settings, args, [
                ["generate_feedback", name, "--force",
                 f"--CourseDirectory.feedback_directory={staging}",
                 *([f"--student={args.student}"] if args.student else [])]
                for name, staging in stagings.items()])
            for name, check in zip(names, checks):
                check()
                _move_into_place(stagings[name], settings.course_dir / "feedback")
                source = nbformat.read(
                    settings.course_dir / "source" / name / course_mod.EXERCISES, 4)
                hidden = [line for cell in source.cells
                          for line in split_hidden(cell.source)[1]]
                pages = sorted((settings.course_dir / "feedback").glob(f"*/{name}/*.html"))
                for page in pages:
                    found = find_leaks(page.read_text(encoding="utf-8"), hidden)
                    leaks += [f"{page}: {line}" for line in found]
                print(f"{name}: {len(pages)} feedback file(s) in "
                      f"{settings.course_dir / 'feedback'}/<student>/{name}/")
        finally:
            shutil.rmtree(settings.course_dir / ".grading" / "staging" / "feedback",
                          ignore_errors=True)
    if leaks:
        print("ERROR: hidden test code found in feedback; do not hand these out:\n  "
              + "\n  ".join(leaks), file=sys.stderr)
        return 1
    return 0


def cmd_export(args) -> int:
    from nbgrader.api import Gradebook

    from utils.grading import alembic_head
    from utils.grading import export as export_mod
    alembic_head.install()

    fmt = export_mod.choose(args.format, {f: () for f in export_mod.FORMATS}, "--format")
    for option, value, applies in [("--canvas-id-column", args.canvas_id_column, "canvas"),
                                   ("--moodle-id-column", args.moodle_id_column, "moodle")]:
        if value is not None and fmt != applies:
            raise ValueError(f"{option} only applies to --format {applies}; drop it or add "
                             f"--format {applies}")
    settings = _settings(args)
    names = None if args.chapter == "all" else course_mod.assignment_names(args.chapter)
    with _exclusive(settings, args):
        with Gradebook(settings.db_url, settings.course_id) as gradebook:
            if fmt == "nbgrader":
                header, rows = export_mod.grade_table(gradebook, names,
                                                      course_dir=settings.course_dir)
            else:
                totals = export_mod.assignment_totals(gradebook, names)
        if fmt == "canvas":
            header, rows = export_mod.canvas_table(totals,
                                                   args.canvas_id_column or "SIS User ID")
        elif fmt == "moodle":
            header, rows = export_mod.moodle_table(totals, args.moodle_id_column or "ID number")
        default = "grades.csv" if fmt == "nbgrader" else f"grades-{fmt}.csv"
        path = export_mod.write_csv(pathlib.Path(args.to) if args.to
                                    else settings.course_dir / default, header, rows)
    if fmt == "nbgrader":
        print(f"wrote {len(rows)} student row(s) to {path}")
        return 0
    missing = totals.missing()
    print(f"wrote {len(totals.students)} student row(s) for {len(totals.assignments)} "
          f"assignment(s) to {path} ({fmt}); {len(missing)} missing submission(s) scored 0")
    ungraded = [f"{student}/{name}" for student, name in missing
                if (settings.course_dir / "submitted" / student / name).is_dir()]
    if ungraded:
        print(f"WARNING: collected but not autograded, exported as missing (run python -m "
              f"utils.grading autograde): {', '.join(ungraded)}", file=sys.stderr)
    if totals.waiting:
        print(f"WARNING: {totals.waiting} graded cell(s) still wait for manual grading and "
              f"count as 0 (grade them in the formgrader, then export again)", file=sys.stderr)
    return 0


def cmd_rebuild(args) -> int:
    from utils.grading.rebuild import rebuild, save_roster

    settings = _settings(args)
    with CourseLock(settings.course_dir, args.command) as lock:
        if lock.note():
            print(lock.note(), file=sys.stderr)
        print(rebuild(settings, lambda *command: _nbgrader(settings, args, *command),
                      force=args.force))
        save_roster(settings)
    return 0


def cmd_lab(args) -> int:
    settings = _settings(args)
    integrity.check(settings)
    jupyter = pathlib.Path(sys.executable).with_name("jupyter")
    command = [str(jupyter), "lab", f"--ServerApp.root_dir={settings.course_dir}",
               *args.lab_args]
    print(f"Formgrader: open the 'Nbgrader > Formgrader' menu in JupyterLab "
          f"(course directory {settings.course_dir})")
    return subprocess.call(command, cwd=settings.course_dir)


INSTRUCTOR_EXTRA = ("the instructor tools need the 'instructor' extra: run "
                    "pip install -e '.[instructor]' in the course repository (make lab and "
                    "make test install it)")


def main(argv=None) -> int:
    import importlib.util
    try:                             # found, not imported (seconds): a student install lacks it
        missing = importlib.util.find_spec("nbgrader") is None
    except ModuleNotFoundError:
        missing = True
    if missing:
        print(f"error: {INSTRUCTOR_EXTRA}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    course_mod.put_venv_on_path()
    try:
        return args.run(args)
    except (ValueError, RuntimeError) as error:
        if diskfull.is_disk_full(error) and not isinstance(error, diskfull.DiskFull):
            return _disk_full(error, args)
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        if diskfull.is_disk_full(error):
            return _disk_full(error, args)
        raise


def _disk_full(error, args) -> int:
    where = getattr(error, "filename", None)
    if not where:
        try:
            where = course_mod.resolve_course_dir(getattr(args, "course_dir", None))
        except ValueError:
            where = "the course directory"
    print(f"error: {diskfull.message(where, f'python -m utils.grading {args.command}')}",
          file=sys.stderr)
    return 2
