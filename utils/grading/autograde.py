"""``autograde``: grade the collected submissions in parallel, sandboxed, resumable.

1. N worker processes (``utils.grading.worker``) grade submissions: the student's code runs in
   a bubblewrap sandbox, the tests in the worker (see ``evaluate``). Each writes a graded
   notebook to ``<course>/.grading/graded/<student>/<assignment>/exercises.ipynb``.
2. The same worker then stores it in the gradebook (``record``): nbgrader's own ``Autograde``
   converter with ``Execute`` replaced by nothing (the outputs are already there), so
   nbgrader's checksums, scores, late penalties and ``autograded/`` copy are used as they are,
   and ``feedback``/``export``/the formgrader work unchanged. Workers record in parallel, each
   submission in its own transactions (a SQLite gradebook keeps a write-ahead log meanwhile:
   ``write_ahead_log``).
3. A submission is done when ``.grading/done/<assignment>/<student>.json`` records the hash of
   the submitted file and the gradebook has it; done submissions are skipped unless ``force``.
   The gradebook entry and the marker are written together (Ctrl-C waits for both).
4. A worker that dies is replaced and its submission graded again (``_run_jobs``); a full disk
   stops the batch (``Summary.disk_full``).
"""

import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import select
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings

from traitlets.config import Configurable

from utils.grading import skip_unused_schema_formats
from utils.grading.course import EXERCISES, NOTEBOOK_ID, REPO, CourseSettings
from utils.grading.diskfull import atomic_write

WORK_DIR = ".grading"                     # inside the course directory
SQLITE_WAIT_SECONDS = 120                 # a worker waits this long for another's write
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
    inherit_fds: tuple = ()               # kept open in the workers (the course lock)


@dataclasses.dataclass
class Summary:
    graded: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    failed: dict = dataclasses.field(default_factory=dict)     # student -> reason
    regraded: dict = dataclasses.field(default_factory=dict)   # student -> the crash not theirs
    disk_full: bool = False               # a full disk stopped the batch
    notes: dict = dataclasses.field(default_factory=dict)      # student -> [note]
    phases: dict = dataclasses.field(default_factory=dict)     # student -> seconds per phase
    seconds: float = 0.0
    pool: object = dataclasses.field(default=None, repr=False)  # a pool this assignment started


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


class SubmissionsView:
    """The gradebook's submissions of one assignment as ``already_graded`` asks for them, read
    from a SQLite gradebook with sqlite3: importing nbgrader takes seconds of the start-up, on
    a core the workers need. ``find_submission`` raises ValueError as nbgrader's does."""

    def __init__(self, students: set):
        self.students = students

    def find_submission(self, assignment, student):
        if student not in self.students:
            raise ValueError(f"No such submission: {assignment} for {student}")


def _submitted_students(db_url: str, assignment: str):
    """The students with a submission of ``assignment`` in a SQLite gradebook, or None where
    this cannot tell (not SQLite, unreadable, or no such assignment: nbgrader then says why)."""
    import sqlite3
    path = _sqlite_file(db_url)
    if path is None:
        return None
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=SQLITE_WAIT_SECONDS)) as db:
            row = db.execute("SELECT id FROM assignment WHERE name = ?", (assignment,)).fetchone()
            if row is None:
                return None
            return {student for (student,) in db.execute(
                "SELECT s.student_id FROM submitted_assignment s JOIN student t "
                "ON t.id = s.student_id WHERE s.assignment_id = ?", (row[0],))}
    except sqlite3.Error:
        return None


@contextlib.contextmanager
def _nbgrader_gradebook(settings, assignment: str):
    skip_unused_schema_formats()
    from nbgrader.api import Gradebook

    from utils.grading import alembic_head
    alembic_head.install()
    with Gradebook(settings.db_url, settings.course_id) as gradebook:
        gradebook.find_assignment(assignment)         # raises MissingEntry (a ValueError)
        yield gradebook


def gradebook_view(settings, assignment: str):
    """A context giving what ``already_graded`` needs of the gradebook: a ``SubmissionsView``
    of a SQLite gradebook, else nbgrader's ``Gradebook`` (it checks the assignment exists)."""
    students = _submitted_students(settings.db_url, assignment)
    if students is None:
        return _nbgrader_gradebook(settings, assignment)
    return contextlib.nullcontext(SubmissionsView(students))


def already_graded(settings, gradebook, assignment, student, path) -> bool:
    marker = _done_marker(settings, assignment, student)
    autograded = settings.course_dir / "autograded" / student / assignment / EXERCISES
    if not (marker.is_file() and autograded.is_file()):
        return False
    try:
        recorded = json.loads(marker.read_text()).get("submission_sha256")
        gradebook.find_submission(assignment, student)
    except ValueError:                                # also nbgrader's MissingEntry
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
    # The notebook is validated once after a phase's preprocessors, not after each of them
    # (nbconvert's own option): an invalid notebook still fails, the valid ones are unchanged.
    config.NotebookExporter.optimistic_validation = True
    return config


skip_unused_schema_formats()      # before the CLI loads nbgrader_config.py (nbconvert, nbformat)


class FastReplay:
    """While open, nbgrader's ``Gradebook`` objects of this process share one SQLAlchemy engine
    and session factory per database URL, create the tables once per engine, and nbgrader's
    cell-metadata check reuses one schema validator. Unchanged, each ``Gradebook`` (about ten per replayed notebook) makes its own
    engine (its SQL compiled again) and session class (SQLAlchemy then updates its event
    listeners for every session class made so far: the replay slowed down with each student),
    and every cell's metadata check validated the schema itself first. Besides, what does not
    change while the replay is open is looked up once (``_read_once``): that the course exists,
    and the assignment's source and graded cells. The same rows are written.
    """

    def __enter__(self):
        from nbgrader import api
        from nbgrader.nbgraderformat import common
        self.api, self.common = api, common
        self.saved = (api.create_engine, api.sessionmaker, common.jsonschema)
        engines, makers, real_engine, real_maker = {}, {}, api.create_engine, api.sessionmaker

        def create_engine(url, **options):
            key = (str(url), tuple(sorted(options.items())))
            if key not in engines:
                if str(url).startswith("sqlite"):      # wait while another worker writes
                    options = dict(options, connect_args={"timeout": SQLITE_WAIT_SECONDS})
                engine = real_engine(url, **options)
                engine.dispose = lambda *args, **kwargs: None     # Gradebook.close: keep it
                engines[key] = engine
            return engines[key]

        def sessionmaker(**options):
            key = tuple(sorted((k, id(v)) for k, v in options.items()))
            if key not in makers:
                makers[key] = real_maker(**options)
            return makers[key]

        self.engines = engines
        api.create_engine, api.sessionmaker = create_engine, sessionmaker
        common.jsonschema = _CheckedSchemas(common.jsonschema)
        self._create_tables_once(api)
        self._read_once(api)
        return self

    def _read_once(self, api) -> None:
        """Each ``Gradebook`` checks that its course exists (a query and a commit, about ten
        times per notebook), and the cell check looks up every cell's source and graded cell
        (about 25 queries). Rows the replay only reads and never changes: once the course is
        known to exist it is not checked again; a cell found is kept, detached from its session
        (its columns loaded; reading a relation of it would raise). Not kept: what is missing."""
        known, cells = set(), {}
        real_check, real_source, real_graded = (api.Gradebook.check_course,
                                                 api.Gradebook.find_source_cell,
                                                 api.Gradebook.find_graded_cell)

        def check_course(gradebook, course_id="default_course", **kwargs):
            key = (str(gradebook.engine.url), course_id)
            if kwargs or key not in known:
                course = real_check(gradebook, course_id=course_id, **kwargs)
                if course is not None:           # found (None: just added, or an error)
                    known.add(key)
                return course
            return None                          # Gradebook.__init__ ignores what it returns

        def kept(real, kind):
            def find(gradebook, name, notebook, assignment):
                key = (str(gradebook.engine.url), kind, name, notebook, assignment)
                if key not in cells:
                    cell = real(gradebook, name, notebook, assignment)   # MissingEntry: raised
                    gradebook.db.expunge(cell)
                    cells[key] = cell
                return cells[key]
            return find

        self.saved_finders = real_check, real_source, real_graded
        api.Gradebook.check_course = check_course
        api.Gradebook.find_source_cell = kept(real_source, "source")
        api.Gradebook.find_graded_cell = kept(real_graded, "graded")

    def _create_tables_once(self, api) -> None:
        """Each ``Gradebook`` lists the database's tables and creates the missing ones (about
        ten queries); once an engine's tables are made, the next ones see that list again."""
        tables, real_create_all, real_inspect = {}, api.Base.metadata.create_all, api.inspect

        def create_all(bind=None, **options):
            if bind not in tables or options:
                real_create_all(bind=bind, **options)
                tables[bind] = real_inspect(bind).get_table_names()

        def inspect(subject, *args, **kwargs):
            if subject in tables and not args and not kwargs:
                return _KnownTables(tables[subject])
            return real_inspect(subject, *args, **kwargs)

        self.saved_inspect = real_inspect
        api.Base.metadata.create_all, api.inspect = create_all, inspect

    def __exit__(self, *exc):
        self.api.create_engine, self.api.sessionmaker, self.common.jsonschema = self.saved
        del self.api.Base.metadata.create_all             # the class's method again
        self.api.inspect = self.saved_inspect
        (self.api.Gradebook.check_course, self.api.Gradebook.find_source_cell,
         self.api.Gradebook.find_graded_cell) = self.saved_finders
        for engine in self.engines.values():
            del engine.dispose                        # the class's method again
            engine.dispose()


class _KnownTables:
    """What ``Gradebook.__init__`` asks of ``inspect(engine)``: the tables made earlier."""

    def __init__(self, names):
        self.names = names

    def get_table_names(self):
        return list(self.names)


class _CheckedSchemas:
    """``jsonschema`` with ``validate`` checking each schema once, not at every call, and each
    instance once per schema if it is valid (the same cell metadata comes back for every
    student: validating it again gives the same answer). An invalid one is checked every time."""

    def __init__(self, module):
        self.module, self.validators, self.valid = module, {}, set()

    def __getattr__(self, name):
        return getattr(self.module, name)

    def validate(self, instance, schema):
        key = json.dumps(schema, sort_keys=True)
        if key not in self.validators:
            cls = self.module.validators.validator_for(schema)
            cls.check_schema(schema)
            self.validators[key] = cls(schema)
        try:
            seen = (key, json.dumps(instance, sort_keys=True))
        except (TypeError, ValueError):           # not JSON: validated, not remembered
            seen = None
        if seen is not None and seen in self.valid:
            return
        error = self.module.exceptions.best_match(self.validators[key].iter_errors(instance))
        if error is not None:
            raise error
        if seen is not None:
            self.valid.add(seen)


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


class RefuseUnsandboxedAutograde(Configurable):
    """Stops plain ``nbgrader autograde`` (set in nbgrader_config.py): it would run student
    code without a sandbox, with the instructor's permissions. An nbconvert preprocessor (a
    configurable callable), so loading the config does not import nbgrader (seconds)."""

    def __call__(self, nb, resources):
        raise RuntimeError("this course grades with `python -m utils.grading autograde` "
                           "(student code in a sandbox, tests outside it); plain nbgrader "
                           "autograde is disabled in nbgrader_config.py")

    preprocess = __call__


# --- workers ------------------------------------------------------------------------------------
class Worker:
    """One grading worker: forked by the pool's zygote (``pipes``: its job and result pipes), or
    its own ``utils.grading.worker`` process (``prepare``: its slot's sandbox settings)."""

    def __init__(self, slot: int, prepare: dict = None, pipes=None):
        self.slot, self.job, self.process = slot, None, None
        if pipes is None:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "utils.grading.worker",
                 json.dumps(dict(prepare or {}, slot=slot))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                cwd=REPO, text=True)
            pipes = self.process.stdin, self.process.stdout
        self.jobs, self.results = pipes

    def send(self, job: dict) -> None:
        self.job = job
        self.jobs.write(json.dumps(dict(job, slot=self.slot)) + "\n")
        self.jobs.flush()

    def stop(self) -> None:
        try:
            self.jobs.close()
        except OSError:
            pass
        if self.process is not None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def interrupt(self) -> None:
        """Stop now (Ctrl-C): the worker ends its sandboxes; killed if it does not stop."""
        if self.process is None:
            return                                    # the pool interrupts the zygote's
        try:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class DeferInterrupt:
    """Ctrl-C waits until the block is over (one student's gradebook entry and done marker
    are written together); in other threads than the main one, nothing changes."""

    def __enter__(self):
        self.pending, self.previous = False, None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, *_):
        self.pending = True

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            if self.pending and exc[0] is None:
                raise KeyboardInterrupt


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


def _maybe_done(settings, assignment, student, path) -> bool:
    """The done marker matches the file (the gradebook is checked later): no nbgrader needed."""
    marker = _done_marker(settings, assignment, student)
    try:
        return json.loads(marker.read_text()).get("submission_sha256") == _file_hash(path)
    except (OSError, ValueError, AttributeError):
        return False


def wait_exited(process: subprocess.Popen, timeout: float) -> int:
    """``process.wait(timeout)``, told the moment the process exits: Popen polls with sleeps of
    up to 50 ms, which the end of every autograde run waited for. Waits on a pidfd (Linux)."""
    if process.poll() is not None:
        return process.returncode
    try:
        pidfd = os.pidfd_open(process.pid)            # (not reaped: the pid is still its own)
    except (AttributeError, OSError):                 # not Linux, or a kernel before 5.3
        return process.wait(timeout=timeout)
    try:
        if not select.select([pidfd], [], [], timeout)[0]:            # readable: it exited
            raise subprocess.TimeoutExpired(process.args, timeout)
    finally:
        os.close(pidfd)
    return process.wait()


class Pool:
    """The workers: one zygote process (``utils.grading.worker``) that starts every slot's
    sandbox template, imports once and forks the workers. Started before this process imports
    nbgrader (seconds), so that all start-up work overlaps."""

    def __init__(self, count: int, prepare: dict, inherit_fds=()):
        self.prepare, self.workers, self.zygote = prepare, [], None
        if count < 1:
            return
        slots, theirs, ours = [], [], []
        for slot in range(count):
            jobs_read, jobs_write = os.pipe()
            results_read, results_write = os.pipe()
            slots.append({"slot": slot, "jobs": jobs_read, "results": results_write})
            theirs += [jobs_read, results_write]
            ours.append((os.fdopen(jobs_write, "w"), os.fdopen(results_read)))
        self.zygote = subprocess.Popen(
            [sys.executable, "-m", "utils.grading.worker", json.dumps(dict(prepare,
                                                                           slots=slots))],
            pass_fds=[*theirs, *inherit_fds], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO,
            start_new_session=True)               # this process passes Ctrl-C on (stop)
        for fd in theirs:
            os.close(fd)
        self.workers = [Worker(slot, pipes=pipes) for slot, pipes in enumerate(ours)]

    def replace(self, worker: Worker) -> Worker:
        replacement = Worker(worker.slot, self.prepare)
        self.workers[self.workers.index(worker)] = replacement
        return replacement

    def stop(self, interrupted: bool = False) -> None:
        if interrupted and self.zygote is not None:
            try:
                os.killpg(self.zygote.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        for worker in self.workers:
            worker.interrupt() if interrupted else worker.stop()
        if self.zygote is not None:
            try:
                wait_exited(self.zygote, timeout=15 if interrupted else 60)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.zygote.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.zygote.wait()


def autograde(settings: CourseSettings, assignment: str, options: Options) -> Summary:
    """Grade the submissions of one assignment; see the module docstring. Ctrl-C stops it after
    the submission being recorded; the next run goes on from there."""
    return autograde_all(settings, [assignment], options)[assignment]


def _pool_settings(course: pathlib.Path, assignments: list, options: Options) -> dict:
    """What every worker's sandbox template needs: limits, paths, and the modules the locked
    setup cells of all these assignments import (imported once in the template, for all); and
    the assignments' notebooks, read and compiled once by the zygote for all its workers."""
    from utils.grading.warm_imports import setup_imports
    releases = [course / "release" / a / EXERCISES for a in assignments]
    imports = [name for release in releases for name in setup_imports(str(release))]
    return {"sandboxed": options.sandboxed, "extra_read_only": list(options.extra_read_only),
            "limits": {"memory_mb": options.memory_mb},
            "warm_imports": list(dict.fromkeys(imports)),
            "assignments": [{"source": str(course / "source" / a / EXERCISES),
                             "release": str(release)} for a, release in zip(assignments,
                                                                            releases)]}


def _sqlite_file(db_url: str):
    """The file of a ``sqlite:///path`` gradebook that exists, else None (another database)."""
    prefix = "sqlite:///"
    if not db_url.startswith(prefix):
        return None
    path = pathlib.Path(db_url[len(prefix):])
    return path if path.is_file() else None


def _journal_mode(path: pathlib.Path, mode: str) -> None:
    """Switch the gradebook's journal mode. Where another program holds it open (the
    formgrader), SQLite may keep the old mode: grading works in either."""
    import sqlite3
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=5)) as connection:
            connection.execute(f"PRAGMA journal_mode={mode}").fetchone()
    except sqlite3.Error:
        pass


@contextlib.contextmanager
def write_ahead_log(db_url: str):
    """While the workers grade, a SQLite gradebook keeps a write-ahead log: one worker reads
    while another writes, instead of waiting for it (with 2 workers, recording a grade waited
    about 30 ms per submission). Afterwards the log is folded back into the database
    (journal mode ``delete``), so the gradebook is again one file to copy or back up."""
    path = _sqlite_file(db_url)
    if path is not None:
        _journal_mode(path, "wal")
    try:
        yield
    finally:
        if path is not None:
            _journal_mode(path, "delete")


def autograde_all(settings: CourseSettings, assignments: list, options: Options) -> dict:
    """Grade the submissions of several assignments with one pool of workers (started once:
    its start-up, seconds, is paid once for all of them). Returns assignment -> Summary."""
    course = settings.course_dir
    found = {a: submissions(settings, a, options.student) for a in assignments}
    for assignment in assignments:
        if not (course / "release" / assignment / EXERCISES).is_file():
            raise ValueError(f"{assignment} has no release version in {course}/release; run "
                             f"python -m utils.grading release --chapter {assignment}")
    wanted = options.workers or os.cpu_count() or 1
    prepare = _pool_settings(course, assignments, options)
    likely = sum(1 for a in assignments for s, path in found[a].items()
                 if options.force or not _maybe_done(settings, a, s, path))
    pool = Pool(min(wanted, likely), prepare, options.inherit_fds) if likely else None
    summaries, current, interrupted = {}, None, False
    with write_ahead_log(settings.db_url):
        try:
            for current in assignments:
                summary = summaries[current] = Summary()
                _grade_assignment(settings, current, found[current], options, prepare, pool,
                                  wanted, summary)
                pool = pool or summary.pool
        except KeyboardInterrupt:
            interrupted = True
        finally:
            pool = pool or (summaries[current].pool if current in summaries else None)
            if pool is not None:
                pool.stop(interrupted)                # the workers are gone before the log
            for summary in summaries.values():
                summary.pool = None
    if interrupted:
        graded = len(summaries[current].graded) if current in summaries else 0
        print(f"\n{current or assignments[0]}: interrupted; {graded} submission(s) graded "
              f"and recorded in this run. Run autograde again to grade the rest (what is done "
              f"is skipped).", file=sys.stderr)
        raise SystemExit(130)
    return summaries


def _grade_assignment(settings, assignment, found, options, prepare, pool, wanted,
                      summary: Summary) -> None:
    """Grade one assignment's submissions into ``summary`` with ``pool`` (started here if None:
    then ``summary.pool``)."""
    started = time.monotonic()
    course = settings.course_dir
    todo = []
    with gradebook_view(settings, assignment) as gradebook:
        for student, path in found.items():
            if not options.force and already_graded(settings, gradebook, assignment,
                                                    student, path):
                summary.skipped.append(student)
            else:
                todo.append(student)
    release = str(course / "release" / assignment / EXERCISES)
    jobs = [{"student": s, "assignment": assignment, "submission": str(found[s]),
             "source": str(course / "source" / assignment / EXERCISES),
             "release": release, "warm_imports": prepare["warm_imports"],
             "output": str(course / GRADED_DIR / s / assignment / f"{NOTEBOOK_ID}.ipynb"),
             "cell_timeout": options.cell_timeout,
             "notebook_timeout": options.notebook_timeout,
             "sandboxed": options.sandboxed,
             "extra_read_only": list(options.extra_read_only),
             "limits": {"memory_mb": options.memory_mb},
             "course": {"course_dir": str(course), "db_url": settings.db_url,
                        "course_id": settings.course_id}}
            for s in todo]
    if jobs:
        if pool is None:                          # the done markers said there was nothing
            pool = Pool(min(wanted, len(jobs)), prepare, options.inherit_fds)
            summary.pool = pool
        count = min(len(pool.workers), len(jobs))
        progress = Progress(len(jobs), count, options.quiet)
        _run_jobs(jobs, pool, summary, progress)
    summary.seconds = time.monotonic() - started


def record(settings: CourseSettings, assignment: str, student: str, result: dict,
           config) -> None:
    """Store one graded notebook in the gradebook and write its done marker, together: Ctrl-C
    waits until both are written (a worker calls this right after grading)."""
    with DeferInterrupt():
        record_grades(settings, assignment, student, config)
        marker = _done_marker(settings, assignment, student)
        marker.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(marker, json.dumps({"submission_sha256": result.get("submission_sha256"),
                                         "notes": result.get("notes", []),
                                         "regraded": result.get("regraded"),
                                         "seconds": result.get("seconds")}, indent=1).encode())


def _finish(result: dict, job: dict, summary: Summary) -> str:
    student = job["student"]
    if result.get("status") != "graded":
        summary.failed[student] = result.get("reason", "unknown failure")
        summary.disk_full = summary.disk_full or bool(result.get("disk_full"))
        return "FAILED"
    summary.graded.append(student)
    if result.get("regraded"):
        summary.regraded[student] = (f"{summary.regraded[student]}; " if student in
                                     summary.regraded else "") + result["regraded"]
    if result.get("phases"):
        summary.phases[student] = result["phases"]
    if result.get("notes"):
        summary.notes[student] = result["notes"]
    return f"graded in {result.get('seconds', 0):.1f} s"


def _run_jobs(jobs, pool: Pool, summary, progress) -> None:
    """Send the jobs to the workers. A worker that dies is replaced and its submission graded
    again from scratch (failed only if that happens twice); a full disk stops the batch."""
    pending, workers, retried = list(jobs), pool.workers, set()
    selector = selectors.DefaultSelector()
    for worker in workers:
        selector.register(worker.results, selectors.EVENT_READ, worker)
    while pending or any(w.job for w in workers):
        for worker in workers:
            if worker.job is None and pending:
                worker.send(pending.pop(0))
        for key, _ in selector.select():
            worker = key.data
            line = worker.results.readline()
            job, worker.job = worker.job, None
            if not line:                              # the worker itself died
                selector.unregister(worker.results)
                result = {"status": "failed", "reason": "the grading worker stopped twice "
                                                        "while grading this submission"}
                replacement = pool.replace(worker)
                selector.register(replacement.results, selectors.EVENT_READ, replacement)
                if job is not None and job["student"] not in retried:
                    retried.add(job["student"])
                    summary.regraded[job["student"]] = "the grading worker stopped"
                    pending.insert(0, job)
                    continue
            else:
                result = json.loads(line)
            if result.get("disk_full"):               # the next ones would fail alike
                summary.failed.update((j["student"], "not graded: the disk is full")
                                      for j in pending)
                pending.clear()
            idle = next((w for w in workers if w.job is None), None)
            if idle is not None and pending:          # busy while we write the gradebook
                idle.send(pending.pop(0))
            if job is not None:
                status = _finish(result, job, summary)
                progress.step(job["student"], status)
