"""``autograde``: grade the collected submissions in parallel, sandboxed, resumable.

1. N worker processes (``utils.grading.worker``) grade submissions: the student's code runs in
   a bubblewrap sandbox, the tests in the worker (see ``evaluate``). Each writes a graded
   notebook to ``<course>/.grading/graded/<student>/<assignment>/exercises.ipynb``.
2. This process alone writes the gradebook: for each graded notebook it runs nbgrader's own
   ``Autograde`` converter with ``Execute`` replaced by nothing (the outputs are already
   there), so nbgrader's checksums, scores, late penalties and ``autograded/`` copy are used
   as they are, and ``feedback``/``export``/the formgrader work unchanged.
3. A submission is done when ``.grading/done/<assignment>/<student>.json`` records the hash of
   the submitted file and the gradebook has it; done submissions are skipped unless ``force``.
"""

import dataclasses
import hashlib
import json
import os
import pathlib
import selectors
import shutil
import subprocess
import sys
import time
import warnings

from nbgrader.preprocessors import NbGraderPreprocessor

from utils.grading.course import EXERCISES, NOTEBOOK_ID, REPO, CourseSettings

WORK_DIR = ".grading"                     # inside the course directory
GRADED_DIR = f"{WORK_DIR}/graded"         # nbgrader's submitted_directory for the replay
UNSANDBOXED_HELP = ("pass --allow-unsandboxed to grade without a sandbox (only for "
                    "submissions you trust)")


@dataclasses.dataclass
class Options:
    workers: int = 0                      # 0: number of CPU cores
    force: bool = False
    student: str = None
    cell_timeout: float = 30
    notebook_timeout: float = 600
    memory_mb: int = 2048
    sandboxed: bool = True
    extra_read_only: tuple = ()
    quiet: bool = False


@dataclasses.dataclass
class Summary:
    graded: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    failed: dict = dataclasses.field(default_factory=dict)     # student -> reason
    notes: dict = dataclasses.field(default_factory=dict)      # student -> [note]
    seconds: float = 0.0


# --- which submissions ------------------------------------------------------------------------
def submissions(settings: CourseSettings, assignment: str, student=None) -> dict:
    """student -> submitted notebook path (it may be missing: graded as unreadable)."""
    root = settings.course_dir / "submitted"
    found = {}
    for folder in sorted(root.glob(f"*/{assignment}")) if root.is_dir() else []:
        if folder.is_dir() and (student is None or folder.parent.name == student):
            found[folder.parent.name] = folder / EXERCISES
    if student and not found:
        raise ValueError(f"no submission of {student!r} for {assignment} in {root}; "
                         f"collect it first")
    return found


def _done_marker(settings, assignment, student) -> pathlib.Path:
    return settings.course_dir / WORK_DIR / "done" / assignment / f"{student}.json"


def _file_hash(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"


def already_graded(settings, gradebook, assignment, student, path) -> bool:
    from nbgrader.api import MissingEntry
    marker = _done_marker(settings, assignment, student)
    autograded = settings.course_dir / "autograded" / student / assignment / EXERCISES
    if not (marker.is_file() and autograded.is_file()):
        return False
    try:
        recorded = json.loads(marker.read_text()).get("submission_sha256")
        gradebook.find_submission(assignment, student)
    except (ValueError, MissingEntry):
        return False
    return recorded == _file_hash(path)


# --- writing the gradebook (this process only) -------------------------------------------------
def _replay_config(settings: CourseSettings):
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader
    config = Config()
    if (settings.course_dir / "nbgrader_config.py").is_file():
        config.merge(PyFileConfigLoader("nbgrader_config.py",
                                        path=str(settings.course_dir)).load_config())
    config.CourseDirectory.root = str(settings.course_dir)
    config.CourseDirectory.db_url = settings.db_url
    config.CourseDirectory.course_id = settings.course_id
    config.CourseDirectory.submitted_directory = GRADED_DIR
    config.Autograde.sanitize_preprocessors = [
        "nbgrader.preprocessors.DeduplicateIds", "nbgrader.preprocessors.OverwriteKernelspec",
        "nbgrader.preprocessors.OverwriteCells", "nbgrader.preprocessors.CheckCellMetadata"]
    config.Autograde.autograde_preprocessors = [
        "nbgrader.preprocessors.IgnorePattern",
        "nbconvert.preprocessors.ClearMetadataPreprocessor",
        "nbgrader.preprocessors.LimitOutput", "nbgrader.preprocessors.SaveAutoGrades",
        "nbgrader.preprocessors.AssignLatePenalties", "nbgrader.preprocessors.CheckCellMetadata"]
    return config


def record_grades(settings: CourseSettings, assignment: str, student: str, config) -> None:
    """Store one graded notebook in the gradebook and autograded/ with nbgrader's Autograde."""
    import logging
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory

    submitted = settings.course_dir / "submitted" / student / assignment / "timestamp.txt"
    staged = settings.course_dir / GRADED_DIR / student / assignment / "timestamp.txt"
    if submitted.is_file():
        shutil.copyfile(submitted, staged)
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id, coursedir.student_id = assignment, student
    converter = Autograde(coursedir=coursedir, config=config)
    converter.force = True
    converter.log.setLevel(logging.ERROR)
    with warnings.catch_warnings():            # nbgrader's own SQLAlchemy warnings
        warnings.simplefilter("ignore")
        converter.start()


class RefuseUnsandboxedAutograde(NbGraderPreprocessor):
    """Stops plain ``nbgrader autograde`` (set in nbgrader_config.py): it would run student
    code without a sandbox, with the instructor's permissions."""

    def preprocess(self, nb, resources):
        raise RuntimeError("this course grades with `python -m utils.grading autograde` "
                           "(student code in a sandbox, tests outside it); plain nbgrader "
                           "autograde is disabled in nbgrader_config.py")


# --- workers ------------------------------------------------------------------------------------
class Worker:
    def __init__(self, slot: int):
        self.slot, self.job = slot, None
        self.process = subprocess.Popen([sys.executable, "-m", "utils.grading.worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=REPO, text=True)

    def send(self, job: dict) -> None:
        self.job = job
        self.process.stdin.write(json.dumps(dict(job, slot=self.slot)) + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


class Progress:
    """A one-line progress bar on a terminal, one line per submission otherwise."""

    def __init__(self, total: int, workers: int, quiet: bool):
        self.total, self.done, self.workers = total, 0, workers
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self.started = time.monotonic()

    def step(self, student: str, status: str) -> None:
        self.done += 1
        if self.quiet:
            return
        elapsed = time.monotonic() - self.started
        if self.tty:
            filled = int(30 * self.done / max(self.total, 1))
            print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
                  f"({self.workers} workers, {elapsed:.0f} s) {student}: {status}\033[K",
                  end="" if self.done < self.total else "\n", file=sys.stderr, flush=True)
        else:
            print(f"[{self.done}/{self.total}, {elapsed:.0f} s] {student}: {status}",
                  file=sys.stderr, flush=True)


def autograde(settings: CourseSettings, assignment: str, options: Options) -> Summary:
    """Grade the submissions of one assignment; see the module docstring."""
    from nbgrader.api import Gradebook

    started = time.monotonic()
    summary = Summary()
    found = submissions(settings, assignment, options.student)
    with Gradebook(settings.db_url, settings.course_id) as gradebook:
        gradebook.find_assignment(assignment)
        todo = []
        for student, path in found.items():
            if not options.force and already_graded(settings, gradebook, assignment, student,
                                                    path):
                summary.skipped.append(student)
            else:
                todo.append(student)
    course = settings.course_dir
    jobs = [{"student": s, "assignment": assignment, "submission": str(found[s]),
             "source": str(course / "source" / assignment / EXERCISES),
             "release": str(course / "release" / assignment / EXERCISES),
             "output": str(course / GRADED_DIR / s / assignment / f"{NOTEBOOK_ID}.ipynb"),
             "cell_timeout": options.cell_timeout, "notebook_timeout": options.notebook_timeout,
             "sandboxed": options.sandboxed, "extra_read_only": list(options.extra_read_only),
             "limits": {"memory_mb": options.memory_mb}}
            for s in todo]
    if not (course / "release" / assignment / EXERCISES).is_file():
        raise ValueError(f"{assignment} has no release version in {course}/release; run "
                         f"python -m utils.grading release --chapter {assignment}")
    count = max(1, min(options.workers or os.cpu_count() or 1, len(jobs) or 1))
    progress = Progress(len(jobs), count, options.quiet)
    config = _replay_config(settings)
    _run_jobs(jobs, count, settings, config, summary, progress)
    summary.seconds = time.monotonic() - started
    return summary


def _finish(result: dict, job: dict, settings, config, summary: Summary) -> str:
    student, assignment = job["student"], job["assignment"]
    if result.get("status") != "graded":
        summary.failed[student] = result.get("reason", "unknown failure")
        return "FAILED"
    try:
        record_grades(settings, assignment, student, config)
    except Exception as error:             # noqa: BLE001 - one student's failure is reported
        summary.failed[student] = f"writing the gradebook failed: {type(error).__name__}: {error}"
        return "FAILED"
    marker = _done_marker(settings, assignment, student)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"submission_sha256": result.get("submission_sha256"),
                                  "notes": result.get("notes", []),
                                  "seconds": result.get("seconds")}, indent=1))
    summary.graded.append(student)
    if result.get("notes"):
        summary.notes[student] = result["notes"]
    return f"graded in {result.get('seconds', 0):.1f} s"


def _run_jobs(jobs, count, settings, config, summary, progress) -> None:
    pending = list(jobs)
    workers = [Worker(slot) for slot in range(count)] if jobs else []
    selector = selectors.DefaultSelector()
    for worker in workers:
        selector.register(worker.process.stdout, selectors.EVENT_READ, worker)
    try:
        while pending or any(w.job for w in workers):
            for worker in workers:
                if worker.job is None and pending:
                    worker.send(pending.pop(0))
            for key, _ in selector.select(timeout=1.0):
                worker = key.data
                line = worker.process.stdout.readline()
                job, worker.job = worker.job, None
                if not line:                              # the worker itself died
                    selector.unregister(worker.process.stdout)
                    result = {"status": "failed", "reason": "the grading worker crashed"}
                    replacement = Worker(worker.slot)
                    workers[workers.index(worker)] = replacement
                    selector.register(replacement.process.stdout, selectors.EVENT_READ,
                                      replacement)
                else:
                    result = json.loads(line)
                idle = next((w for w in workers if w.job is None), None)
                if idle is not None and pending:          # busy while we write the gradebook
                    idle.send(pending.pop(0))
                if job is not None:
                    status = _finish(result, job, settings, config, summary)
                    progress.step(job["student"], status)
    finally:
        for worker in workers:
            worker.stop()
