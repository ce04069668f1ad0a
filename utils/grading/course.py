"""The instructor's nbgrader course directory: where it is, its settings, and running nbgrader in it.

Layout (nbgrader's own): ``source/<assignment>/`` instructor notebooks, ``release/`` student
versions to hand out, ``submitted/<student>/<assignment>/``, ``autograded/``, ``feedback/``,
``gradebook.db`` and ``nbgrader_config.py``. Assignment name = chapter folder name.
The directory lives outside the git checkout: it holds student work and grades.
"""

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

from utils.grading import COURSE_DIR_ENV_VAR, GRADING_ENV_VAR, NBGRADER_MAIN

REPO = pathlib.Path(__file__).resolve().parents[2]
CHAPTERS_DIR = REPO / "chapters"
# Where assignments are read from instead of chapters/ (the grader's security tests point it at
# a frozen assignment, so they do not change whenever a lesson's exercises do).
CHAPTERS_ENV_VAR = "ATTENTION_COURSE_CHAPTERS_DIR"
EXERCISES = "exercises.ipynb"
LANGUAGES = ("en", "zh-CN")


def exercises_in(chapter: pathlib.Path, language: str = "en") -> pathlib.Path:
    """A chapter's instructor notebook in ``language``: exercises.ipynb, or its Chinese twin
    exercises.zh-CN.ipynb (built by python -m utils.i18n; released as exercises.ipynb)."""
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not one the course speaks; use "
                         f"{' or '.join(LANGUAGES)}")
    path = chapter / (EXERCISES if language == "en" else f"exercises.{language}.ipynb")
    if not path.is_file():
        raise ValueError(f"{chapter.name} has no {path.name}; build it with "
                         f"python -m utils.i18n build --execute {chapter / EXERCISES}")
    return path
NOTEBOOK_ID = "exercises"             # nbgrader's notebook id = file name without .ipynb
CONFIG_FILE = "nbgrader_config.py"
DEFAULT_COURSE_DIR = pathlib.Path("~/attention-course-grading")
DEFAULT_COURSE_ID = "attention-course"
DEFAULT_TIMEOUT = 30                  # seconds per cell (nbgrader's Execute.timeout)
DEFAULT_MEMORY_MB = 2048              # address-space limit of each grading kernel
CHAPTER_NAME = re.compile(r"^\d\d_[a-z0-9_]+$")
# Bumped when write_config's text changes in a way older course directories must pick up
# (2: student content made inert in the formgrader and feedback pages; 3: the feedback pages'
# faster exporter, utils.grading.feedback_html).
CONFIG_VERSION = 3
_CONFIG_VERSION_LINE = f"# config-version: {CONFIG_VERSION}"


@dataclasses.dataclass
class CourseSettings:
    """What nbgrader_config.py records for one course directory."""
    course_dir: pathlib.Path
    course_id: str = DEFAULT_COURSE_ID
    db_url: str = ""
    timeout: int = DEFAULT_TIMEOUT
    memory_mb: int = DEFAULT_MEMORY_MB

    def __post_init__(self):
        if not self.db_url:
            self.db_url = f"sqlite:///{self.course_dir / 'gradebook.db'}"
        if not (isinstance(self.timeout, int) and self.timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if not (isinstance(self.memory_mb, int) and self.memory_mb >= 512):
            raise ValueError(f"memory limit must be at least 512 MB (torch needs about 1 GB "
                             f"of address space), got {self.memory_mb!r}")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.course_id):
            raise ValueError(f"course id {self.course_id!r} may only contain letters, digits, "
                             f"'_', '-' and '.'")


def resolve_course_dir(path=None) -> pathlib.Path:
    """``path``, else $ATTENTION_COURSE_GRADING_DIR, else ~/attention-course-grading."""
    raw = path or os.environ.get(COURSE_DIR_ENV_VAR) or DEFAULT_COURSE_DIR
    course_dir = pathlib.Path(raw).expanduser().resolve()
    if course_dir == REPO or REPO in course_dir.parents:
        raise ValueError(f"course directory {course_dir} is inside the course repository "
                         f"{REPO}; it holds student work and grades, which must never be "
                         f"committed: choose a folder outside it (--course-dir or "
                         f"${COURSE_DIR_ENV_VAR})")
    return course_dir


def default_chapters_dir() -> pathlib.Path:
    """``$ATTENTION_COURSE_CHAPTERS_DIR`` if set, else the repository's chapters/."""
    return pathlib.Path(os.environ.get(CHAPTERS_ENV_VAR) or CHAPTERS_DIR)


def exercise_chapters(chapters_dir: pathlib.Path = None) -> list:
    """Chapter folders (sorted) that have an exercises notebook."""
    chapters_dir = chapters_dir or default_chapters_dir()
    return sorted(p for p in chapters_dir.iterdir()
                  if p.is_dir() and CHAPTER_NAME.match(p.name) and (p / EXERCISES).is_file())


def resolve_chapters(spec, chapters_dir: pathlib.Path = None) -> list:
    """``"01"``, ``"1"``, ``"01_attention_cues"`` or ``"all"``/None -> chapter folders."""
    chapters_dir = chapters_dir or default_chapters_dir()
    available = exercise_chapters(chapters_dir)
    if spec in (None, "", "all"):
        if not available:
            raise ValueError(f"no chapter in {chapters_dir} has an {EXERCISES}")
        return available
    spec = str(spec)
    wanted = spec.zfill(2) if spec.isdigit() else spec
    matches = [p for p in available if p.name == wanted or p.name.split("_")[0] == wanted]
    if not matches:
        names = ", ".join(p.name for p in available) or "none"
        raise ValueError(f"no chapter {spec!r} with exercises; pass a number like 01, a folder "
                         f"name, or 'all' (chapters with exercises: {names})")
    return matches


def assignment_names(spec) -> list:
    """Assignment names for ``--chapter`` (chapter folder names)."""
    return [p.name for p in resolve_chapters(spec)]


def read_settings(course_dir: pathlib.Path) -> CourseSettings:
    """Settings recorded in ``<course_dir>/nbgrader_config.py`` (defaults if there is none)."""
    config_path = course_dir / CONFIG_FILE
    if not config_path.is_file():
        return CourseSettings(course_dir)
    config = _read_literally(config_path)
    if config is None:                      # edited beyond plain values: run it as nbgrader does
        from traitlets.config.loader import PyFileConfigLoader
        config = PyFileConfigLoader(CONFIG_FILE, path=str(course_dir)).load_config()
    course = config.get("CourseDirectory", {})
    execute = config.get("Execute", {})
    limits = [int(m.group(1)) for arg in execute.get("extra_arguments", [])
              if (m := _MEMORY_LIMIT.search(arg))]
    memory = limits[0] // 2 ** 20 if limits else DEFAULT_MEMORY_MB
    return CourseSettings(course_dir,
                          course_id=course.get("course_id", DEFAULT_COURSE_ID),
                          db_url=course.get("db_url", ""),
                          timeout=execute.get("timeout", DEFAULT_TIMEOUT),
                          memory_mb=memory)


# The values read_settings needs; _read_literally reads them without running the file.
_READ_KEYS = {("CourseDirectory", "course_id"), ("CourseDirectory", "db_url"),
              ("Execute", "timeout"), ("Execute", "extra_arguments")}


def _read_literally(path: pathlib.Path):
    """{section: {key: value}} of the ``_READ_KEYS`` a config file sets to plain values, or
    None when only running it can tell (any statement but imports, ``c = get_config()`` and
    ``c.Section.key = ...``, or a read key set to an expression). Running the file imports
    nbgrader and nbconvert: seconds before autograde could start its workers."""
    import ast
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    config = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            return None
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "c" and ast.dump(node.value) == \
                ast.dump(ast.parse("get_config()", mode="eval").body):
            continue
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)
                and isinstance(target.value.value, ast.Name) and target.value.value.id == "c"):
            return None
        key = (target.value.attr, target.attr)
        if key in _READ_KEYS:
            try:
                config.setdefault(key[0], {})[key[1]] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
    return config


def settings_for(course_dir=None, course_id=None, db_url=None, timeout=None,
                 memory_mb=None) -> CourseSettings:
    """Effective settings: explicit options win over nbgrader_config.py, which wins over
    defaults. Writes the config file when it is missing or an option changed it."""
    course_dir = resolve_course_dir(course_dir)
    current = read_settings(course_dir)
    updated = dataclasses.replace(
        current,
        course_id=course_id or current.course_id,
        db_url=db_url or current.db_url,
        timeout=current.timeout if timeout is None else timeout,
        memory_mb=current.memory_mb if memory_mb is None else memory_mb)
    if updated != current or not config_is_current(course_dir):
        write_config(updated)
    return updated


def config_is_current(course_dir: pathlib.Path) -> bool:
    """True if ``nbgrader_config.py`` exists and was written by this version of write_config."""
    path = course_dir / CONFIG_FILE
    return path.is_file() and _CONFIG_VERSION_LINE in path.read_text(encoding="utf-8")


# How read_settings finds the memory limit again in the kernel's startup line.
_MEMORY_LIMIT = re.compile(r"RLIMIT_AS, \((\d+),")


def _kernel_startup_line(memory_mb: int) -> str:
    """Python run by every grading kernel before the notebook: grading flag + memory cap."""
    limit = memory_mb * 2 ** 20
    return (f"import os as _g_os, resource as _g_res; "
            f"_g_os.environ['{GRADING_ENV_VAR}'] = '1'; "
            f"_g_res.setrlimit(_g_res.RLIMIT_AS, ({limit}, {limit})); del _g_os, _g_res")


def write_config(settings: CourseSettings) -> pathlib.Path:
    """Write ``nbgrader_config.py`` so that plain ``nbgrader`` and the formgrader agree with
    ``python -m utils.grading`` (same course, gradebook, timeouts, feedback without hidden tests)."""
    settings.course_dir.mkdir(parents=True, exist_ok=True)
    kernel_args = ["--HistoryManager.hist_file=:memory:",
                   "--IPKernelApp.exec_lines=" + _kernel_startup_line(settings.memory_mb)]
    text = f'''\
# nbgrader configuration of the "Attention, interactively" course.
# Generated by `python -m utils.grading` (course repository: {REPO}).
{_CONFIG_VERSION_LINE} (an older file is rewritten by the next command, keeping its settings)
# Re-run a command with --course-id / --db-url / --timeout / --memory-mb to change these values;
# edits by hand are kept until then.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import GetGrades

from utils.grading.autograde import RefuseUnsandboxedAutograde
from utils.grading.export import PerCellCsvExportPlugin
from utils.grading.feedback import RedactHiddenTests
from utils.grading.feedback_html import FeedbackHTMLExporter
from utils.grading.inert import InertStudentContent

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.root = {str(settings.course_dir)!r}
c.CourseDirectory.course_id = {settings.course_id!r}
c.CourseDirectory.db_url = {settings.db_url!r}

# Per-cell timeout (seconds) and memory cap, read by `python -m utils.grading autograde`
# (which runs student code in a sandbox with ${GRADING_ENV_VAR}=1; see utils.grading.sandbox).
c.Execute.timeout = {settings.timeout!r}
c.Execute.interrupt_on_timeout = True
c.Execute.extra_arguments = {kernel_args!r}

# A deleted test cell is put back (from the instructor version) and run, not scored as missing.
c.OverwriteCells.add_missing_cells = True

# Plain `nbgrader autograde` (and the formgrader's autograde button) would run student code
# unsandboxed with your permissions, so it refuses: use `python -m utils.grading autograde`.
c.Autograde.autograde_preprocessors = [RefuseUnsandboxedAutograde]

# Student content is inert in every HTML page: the formgrader's submission view and the
# feedback files (utils.grading.inert: cells rebuilt, markdown and HTML sanitized by nh3).
c.HTMLExporter.preprocessors = [InertStudentContent]
c.HTMLExporter.filters = {{"markdown2html": "utils.grading.inert.markdown_to_inert_html"}}

# Feedback shows test results and points but not the code of hidden tests. Its pages are
# nbconvert's HTML, without a last pass that would change nothing (utils.grading.feedback_html).
c.GenerateFeedback.exporter_class = FeedbackHTMLExporter
c.GenerateFeedback.preprocessors = [GetGrades, RedactHiddenTests, InertStudentContent,
                                    CSSHTMLHeaderPreprocessor]

# `nbgrader export` writes one column per graded cell (plus total).
c.ExportApp.plugin_class = PerCellCsvExportPlugin
'''
    from utils.grading.diskfull import atomic_write
    return atomic_write(settings.course_dir / CONFIG_FILE, text.encode())


def put_venv_on_path() -> None:
    """Put this interpreter's bin/ first on PATH: nbgrader's Gradebook shells out to
    ``alembic``, which is only found there when the venv is not activated."""
    bin_dir = str(pathlib.Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if parts[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join([bin_dir, *parts])


def run_nbgrader(settings: CourseSettings, *args: str, quiet: bool = False,
                 extra_env=None) -> subprocess.CompletedProcess:
    """Run ``python -m nbgrader <args>`` in the course directory with its config (without the
    unused schema format's import cost: ``utils.grading.NBGRADER_MAIN``)."""
    put_venv_on_path()
    env = dict(os.environ, **(extra_env or {}))
    command = [sys.executable, "-c", NBGRADER_MAIN, *args,
               f"--CourseDirectory.root={settings.course_dir}",
               f"--CourseDirectory.db_url={settings.db_url}",
               f"--CourseDirectory.course_id={settings.course_id}"]
    return subprocess.run(command, cwd=settings.course_dir, env=env, text=True,
                          capture_output=quiet, check=False)


def run_nbgrader_batch(settings: CourseSettings, commands: list, quiet: bool = False,
                       extra_env=None) -> list:
    """``run_nbgrader`` for each of ``commands`` (argument lists), one after another in ONE
    process (``utils.grading.nbgrader_batch``: nbgrader's imports are paid once, not once per
    chapter). Stops at the first command that fails. Returns one ``CompletedProcess`` per
    command that ran or was due (its ``stderr``: that command's lines, when ``quiet``); a
    command the process died in gets the process's exit status."""
    import json
    import tempfile

    put_venv_on_path()
    env = dict(os.environ, **(extra_env or {}))
    course = [f"--CourseDirectory.root={settings.course_dir}",
              f"--CourseDirectory.db_url={settings.db_url}",
              f"--CourseDirectory.course_id={settings.course_id}"]
    argvs = [[*command, *course] for command in commands]
    with tempfile.TemporaryDirectory(prefix="nbgrader-batch-") as scratch:
        results = pathlib.Path(scratch) / "statuses.json"
        process = subprocess.run([sys.executable, "-m", "utils.grading.nbgrader_batch",
                                  str(results), json.dumps(argvs)],
                                 cwd=settings.course_dir, env=env, text=True,
                                 capture_output=quiet, check=False)
        statuses = json.loads(results.read_text()) if results.is_file() else []
    from utils.grading.nbgrader_batch import MARKER
    logs = (process.stderr or "").split(MARKER + "\n") if quiet else []
    done = []
    for index, argv in enumerate(argvs[:len(statuses) + 1]):
        status = statuses[index] if index < len(statuses) else (process.returncode or 1)
        log = logs[index] if index < len(logs) else None
        done.append(subprocess.CompletedProcess(argv, status, None, log))
    return done
