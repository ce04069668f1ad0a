"""A grading worker: grades submissions one after the other for ``utils.grading.autograde``.

Run as ``python -m utils.grading.worker [<slot settings JSON>]``; it reads one JSON job per line
on stdin and answers one JSON line per job on its own copy of stdout. With ``"slots"`` in the
settings it is a zygote instead: it imports once and forks one worker per slot, each with its
own job and result pipes (``zygote``), so N workers cost one start-up; their sandbox templates
are cloned from one the zygote starts first (one torch import in the sandbox for all). A job
names the submitted notebook, the trusted source and release notebooks, where to write the
graded notebook, and the limits. The slot settings (given at start) let the worker start its
sandbox template while it imports torch itself. After grading, the worker records the graded
notebook in the gradebook and writes its done marker (``autograde.record``). A submission
during which the student's process died of something its code did not cause
(``NotebookGrader.foreign``: a signal no limit sends, a sandbox that could not start) is graded
once more from scratch; only a death that happens again stands, with a note saying so.

Work that is the same for every student is done once per worker: reading the source and release
notebooks, the imports of the setup cells, and (as root) the sandbox template, from which each
student's process is forked (see ``utils.grading.template``); a worker whose template stops
starts a new one of its own. Without root, each student gets a new sandbox process, started
while the previous submission is graded.
"""

import copy
import dataclasses
import hashlib
import json
import os
import pathlib
import sys
import time
import traceback

from utils.grading import GRADING_ENV_VAR
from utils.grading.diskfull import atomic_write, is_disk_full
from utils.grading.sandbox import Limits, Sandbox, SandboxDied, SandboxTemplate
from utils.grading.warm_imports import setup_imports


@dataclasses.dataclass
class Job:
    student: str
    assignment: str
    submission: str                   # path of the submitted notebook
    source: str                       # <course>/source/<assignment>/exercises.ipynb
    release: str                      # <course>/release/<assignment>/exercises.ipynb
    output: str                       # where the graded notebook goes
    slot: int = 0
    cell_timeout: float = 30
    notebook_timeout: float = 600
    sandboxed: bool = True
    extra_read_only: tuple = ()
    limits: dict = dataclasses.field(default_factory=dict)
    course: dict = None               # course_dir, db_url, course_id: record in the gradebook
    warm_imports: tuple = None        # the template's imports (default: the release's setup's)


class SpareSandbox:
    """The next submission's sandbox, started while this one is graded (it hides the
    seconds torch needs to import). A spare never ran student code; each is used once.
    Used only where no template can be (not root, or unsandboxed)."""

    def __init__(self):
        self.key, self.sandbox = None, None

    def start(self, key, factory) -> None:
        self.discard()
        try:
            self.key, self.sandbox = key, factory()
        except Exception:                          # noqa: BLE001 - the job starts its own
            self.sandbox = None

    def take(self, key):
        """The spare for ``key`` if there is a healthy one, else None."""
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None and (self.key != key or sandbox.death):
            sandbox.close()
            sandbox = None
        return sandbox

    def discard(self) -> None:
        sandbox = self.take(None)
        if sandbox is not None:
            sandbox.close()


class TemplateSlot:
    """This worker's sandbox template, started once and restarted only if it stops."""

    def __init__(self):
        self.key, self.template = None, None

    def get(self, key, factory) -> SandboxTemplate:
        if self.template is not None and (self.key != key or not self.template.alive()):
            self.discard()
        if self.template is None:
            self.key, self.template = key, factory()
        return self.template

    def discard(self) -> None:
        if self.template is not None:
            self.template.close()
        self.key, self.template = None, None


SPARE = SpareSandbox()
TEMPLATE = TemplateSlot()
_CACHE = {}
_RECORDERS = {}


def _recorder(course: dict):
    """(settings, nbgrader replay config) of a course, made once; the replay speed-ups of
    ``autograde.FastReplay`` stay on for this process."""
    key = (course["course_dir"], course["db_url"], course["course_id"])
    if key not in _RECORDERS:
        from utils.grading import autograde
        from utils.grading.course import CourseSettings
        if not _RECORDERS:
            autograde.FastReplay().__enter__()
        settings = CourseSettings(course_dir=pathlib.Path(course["course_dir"]),
                                  course_id=course["course_id"], db_url=course["db_url"])
        _RECORDERS[key] = (settings, autograde._replay_config(settings))
    return _RECORDERS[key]


def _cached(kind: str, path: str, compute):
    """``compute(path)``, once per file version (path, size, modification time)."""
    stat = os.stat(path)
    key = (kind, path, stat.st_size, stat.st_mtime_ns)
    if key not in _CACHE:
        _CACHE[key] = compute(path)
    return _CACHE[key]


def _read_notebook(path: str):
    import nbformat
    return nbformat.read(path, as_version=4)


def _template_key(slot, extra_read_only, limits: Limits, imports) -> tuple:
    return (slot, tuple(extra_read_only), limits.file_mb, tuple(imports))


def _template_for(slot, extra_read_only, limits: Limits, imports) -> SandboxTemplate:
    return TEMPLATE.get(_template_key(slot, extra_read_only, limits, imports),
                        lambda: SandboxTemplate(limits, slot, extra_read_only, imports))


def prepare(settings: dict) -> None:
    """Start the sandbox template for this worker's slot now (it imports torch meanwhile)."""
    if SandboxTemplate.supported(settings.get("sandboxed", True)):
        limits = Limits(**settings.get("limits", {}))
        imports = tuple(settings.get("warm_imports", ()))
        _template_for(settings.get("slot", 0), tuple(settings.get("extra_read_only", ())),
                      limits, imports)


def grade(job: Job) -> dict:
    """Grade one submission; the result says 'graded' (with notes) or 'failed' (with why)."""
    import nbformat
    from utils.grading.evaluate import NotebookGrader, add_notes, mark_unreadable
    from utils.grading.normalize import normalize
    from utils.grading.student_text import notebook_language, translate_outputs

    started = time.monotonic()
    cpu_started = time.process_time()
    raw = pathlib.Path(job.submission).read_bytes()
    source_nb = _cached("notebook", job.source, _read_notebook)
    release_nb = _cached("notebook", job.release, _read_notebook)
    nb, notes, unreadable = normalize(raw, source_nb, release_nb)
    # What the grader writes into the notebook speaks the language the assignment was released in.
    language = _cached("language", job.source, lambda _path: notebook_language(source_nb))
    limits = Limits(**job.limits)
    imports = (tuple(job.warm_imports) if job.warm_imports is not None
               else _cached("imports", job.release, setup_imports))

    if SandboxTemplate.supported(job.sandboxed):
        def make_sandbox():
            template = _template_for(job.slot, job.extra_read_only, limits, imports)
            try:
                return Sandbox(limits, slot=job.slot, template=template)
            except SandboxDied:
                if template.alive():
                    raise
            return Sandbox(limits, slot=job.slot,     # the template had stopped: a new one
                           template=_template_for(job.slot, job.extra_read_only, limits,
                                                  imports))
    else:
        key = (job.slot, job.sandboxed, tuple(job.extra_read_only), json.dumps(job.limits))

        def new_sandbox():
            return Sandbox(limits, slot=job.slot, sandboxed=job.sandboxed,
                           extra_read_only=job.extra_read_only, imports=imports)

        def make_sandbox():
            sandbox = SPARE.take(key) or new_sandbox()
            SPARE.start(key, new_sandbox)            # warm up the next one meanwhile
            return sandbox

    regraded = None
    if unreadable:
        mark_unreadable(nb, unreadable)
    else:
        def attempt():
            graded_nb = copy.deepcopy(nb)
            grader = NotebookGrader(make_sandbox, job.cell_timeout, job.notebook_timeout)
            try:
                return graded_nb, grader.grade(graded_nb), grader.foreign
            except SandboxDied as error:      # before any student code ran: not their fault
                return None, [], grader.foreign or [str(error)]

        graded_nb, events, foreign = attempt()
        if foreign:                           # a death the student's code did not cause
            regraded = "; ".join(foreign)
            graded_nb, events, foreign = attempt()            # from scratch, a fresh sandbox
            if graded_nb is None:
                return {"status": "failed", "student": job.student,
                        "reason": f"the sandbox failed twice: {'; '.join(foreign)}"}
            events += [f"{death}; it happened again when the whole submission was graded a "
                       f"second time from scratch, so it counts" for death in foreign]
        elif graded_nb is None:
            return {"status": "failed", "student": job.student, "reason": "; ".join(foreign)}
        nb, notes = graded_nb, notes + events
    translate_outputs(nb, language)
    add_notes(nb, notes, language)
    output = pathlib.Path(job.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(output, nbformat.writes(nb).encode())
    graded = time.monotonic()
    result = {"status": "graded", "student": job.student, "notes": notes, "regraded": regraded,
              "submission_sha256": hashlib.sha256(raw).hexdigest(),
              "seconds": round(graded - started, 2),
              # wall seconds of each phase, and this worker's CPU seconds (sandbox excluded)
              "phases": {"grade": round(graded - started, 3),
                         "grade_cpu": round(time.process_time() - cpu_started, 3)}}
    if job.course:
        from utils.grading import autograde
        settings, config = _recorder(job.course)
        cpu_recording = time.process_time()
        try:
            autograde.record(settings, job.assignment, job.student, result, config)
        except Exception as error:            # noqa: BLE001 - one student's failure is reported
            return {"status": "failed", "student": job.student, "disk_full": is_disk_full(error),
                    "reason": f"writing the gradebook failed: {type(error).__name__}: {error}"}
        result["phases"].update(record=round(time.monotonic() - graded, 3),
                                record_cpu=round(time.process_time() - cpu_recording, 3))
    return result


def _warm_up() -> None:
    """The imports every job needs, paid once before the first job."""
    from utils.grading import skip_unused_schema_formats
    skip_unused_schema_formats()
    import torch  # (the tests compare tensors)
    # One thread, as in the sandbox: a test's tensors are small, and with the other core busy
    # (another worker) a second thread made torch.softmax over a non-last axis 0.1-3 ms a call.
    torch.set_num_threads(1)
    import utils.reproducibility  # noqa: F401  (the locked setup cells call set_seed)
    import utils.grading.evaluate  # noqa: F401  (and nbformat, IPython's input transformer)
    _import_nbgrader_package_unrun()
    import nbgrader.converters  # noqa: F401  (the gradebook replay)
    _first_use()
    keep_imports_out_of_gc()


def _import_nbgrader_package_unrun() -> None:
    """Make the ``nbgrader`` package importable without running its ``__init__``, which loads
    nbgrader's four Jupyter server extensions (their web handlers, the exchange, the apps: about
    0.13 s of CPU on the zygote's way to the first submission) that grading never uses. The
    package module is made from its spec, unexecuted, with its ``__version__``; its submodules
    (converters, preprocessors, api) import as usual."""
    import importlib
    import importlib.util
    if "nbgrader" in sys.modules:
        return
    spec = importlib.util.find_spec("nbgrader")
    if spec is None or not spec.submodule_search_locations:
        return                                    # the import below says what is missing
    sys.modules["nbgrader"] = importlib.util.module_from_spec(spec)
    sys.modules["nbgrader"].__version__ = importlib.import_module("nbgrader._version").__version__


def keep_imports_out_of_gc() -> None:
    """Move every object made so far (torch's and nbgrader's modules, about 270,000) out of
    the garbage collector's reach: each full collection walked them all, 0.2-0.3 s of CPU, about
    once per ten submissions. Before a fork, it also keeps their pages shared."""
    import gc
    gc.freeze()


def _first_use() -> None:
    """What the first submission would pay once more in every forked worker: the notebook
    schema's validators (compiled on first use; the replay validates strictly and relaxed),
    SQLAlchemy's mapper set-up of nbgrader's tables, and IPython's cell transformer."""
    import nbformat
    from IPython.core.inputtransformer2 import TransformerManager
    from sqlalchemy.orm import configure_mappers
    import nbgrader.api  # noqa: F401  (its tables, for configure_mappers)
    for relax in (False, True):
        nbformat.validate(nbformat.v4.new_notebook(), relax_add_props=relax)
    configure_mappers()
    TransformerManager().transform_cell("x = 1\n")


def _warm_assignment(source: str, release: str) -> None:
    """Read an assignment's notebooks and compile its trusted cells as an unchanged submission
    is graded (a zygote does it once for the workers it forks; a failure here changes nothing:
    the job does it all again)."""
    from utils.grading.evaluate import compile_trusted
    from utils.grading.normalize import normalize
    from utils.grading.student_text import notebook_language
    try:
        source_nb = _cached("notebook", source, _read_notebook)
        release_nb = _cached("notebook", release, _read_notebook)
        _cached("language", source, lambda _path: notebook_language(source_nb))
        nb, _notes, unreadable = normalize(pathlib.Path(release).read_bytes(), source_nb,
                                           release_nb)
        if not unreadable:
            compile_trusted(nb)
    except Exception:                             # noqa: BLE001
        traceback.print_exc()


def serve(jobs, results) -> None:
    """Grade the jobs read from ``jobs`` (one JSON line each), one JSON result line each."""
    try:
        for line in jobs:
            try:
                fields = json.loads(line)
                fields["extra_read_only"] = tuple(fields.get("extra_read_only", ()))
                result = grade(Job(**fields))
            except Exception as error:            # noqa: BLE001 - reported, the worker goes on
                result = {"status": "failed", "reason": f"{type(error).__name__}: {error}",
                          "disk_full": is_disk_full(error),
                          "detail": traceback.format_exc()[-3000:]}
            results.write(json.dumps(result) + "\n")
            results.flush()
    finally:
        SPARE.discard()
        TEMPLATE.discard()


def _mother_template(settings: dict):
    """The pool's sandbox template that forks one template per slot (``SandboxTemplate.clone``),
    started now so that it imports torch beside the zygote; None where none can be."""
    if not SandboxTemplate.supported(settings.get("sandboxed", True)):
        return None
    try:
        return SandboxTemplate(Limits(**settings.get("limits", {})), 0,
                               tuple(settings.get("extra_read_only", ())),
                               tuple(settings.get("warm_imports", ())), mother=True)
    except Exception:                             # noqa: BLE001 - each worker starts its own
        traceback.print_exc()
        return None


def _slot_templates(mother, asked: list, settings: dict) -> dict:
    """{slot: (template key, its template cloned from ``mother``)}, from the control sockets
    ``asked`` for (one per slot); a slot left out starts its own template at its first job."""
    templates = {}
    if mother is None:
        return templates
    limits = Limits(**settings.get("limits", {}))
    for slot, control in zip(settings["slots"], asked):
        key = _template_key(slot["slot"], tuple(settings.get("extra_read_only", ())), limits,
                            tuple(settings.get("warm_imports", ())))
        try:
            templates[slot["slot"]] = (key, mother.clone(slot["slot"], control))
        except Exception:                         # noqa: BLE001 - the first job tries again
            traceback.print_exc()
    return templates


def zygote(settings: dict, report) -> None:
    """Start the pool's sandbox template, import once, then fork one worker per slot (its job
    and result pipes are ``settings["slots"]``), each with a template cloned for its slot;
    report their pids, wait for them."""
    import signal
    slots = settings["slots"]
    # The template imports torch beside this process (one import serves every slot), then
    # clones the slots' templates, asked for now, while this process still imports.
    mother = _mother_template(settings)
    asked = [mother.ask_clone() for _ in slots] if mother is not None else []
    _warm_up()
    for assignment in settings.get("assignments", ()):
        _warm_assignment(assignment["source"], assignment["release"])
    templates = _slot_templates(mother, asked, settings)
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is for the workers
    keep_imports_out_of_gc()                          # and the assignments read just now
    pids = []
    for slot in slots:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            code = 0
            try:
                report.close()
                for other in slots:
                    if other is not slot:
                        os.close(other["jobs"])
                        os.close(other["results"])
                for number, (key, template) in templates.items():
                    if number == slot["slot"]:
                        TEMPLATE.key, TEMPLATE.template = key, template
                    else:
                        template.forget()
                if mother is not None:
                    mother.forget()
                serve(os.fdopen(slot["jobs"]), os.fdopen(slot["results"], "w"))
            except KeyboardInterrupt:
                code = 130
            except BaseException:                     # noqa: BLE001 - never return to the zygote
                traceback.print_exc()
                code = 1
            os._exit(code)
        pids.append(pid)
    for slot in slots:
        os.close(slot["jobs"])
        os.close(slot["results"])
    report.write(json.dumps({"pids": pids}) + "\n")
    report.flush()
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    for _, template in templates.values():
        template.close()
    if mother is not None:
        mother.close()


def main() -> None:
    os.environ[GRADING_ENV_VAR] = "1"         # locked cells here skip their demos too
    # Results go to a private copy of stdout; anything else printed goes to stderr.
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    settings = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    if "slots" in settings:
        zygote(settings, results)
        # Its workers and templates are gone and everything is flushed: skip the interpreter's
        # teardown, about a second with torch and nbgrader loaded, which autograde waits for.
        for stream in (results, sys.stdout, sys.stderr):
            stream.flush()
        os._exit(0)
    try:
        prepare(settings)
    except Exception:                         # noqa: BLE001 - the first job tries again
        traceback.print_exc()
    _warm_up()
    serve(sys.stdin, results)


if __name__ == "__main__":
    main()
