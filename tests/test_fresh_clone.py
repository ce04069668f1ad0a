"""A fresh clone works with nothing beside it: no ``../shared``, no data variable, no network.

The repository is cloned into an empty temporary folder (uncommitted changes of the working tree
are copied over it, so the test checks what is on disk; on CI the tree is clean and the clone is
exactly ``main``). In that clone, with the data variables unset, an empty course cache and every
network connection refused (an audit hook that every Python process of the clone loads through
``sitecustomize``), it

- loads every shipped model through the lessons' own functions, with training replaced by an
  error, and checks that each one comes from the clone's ``assets/models/``;
- imports every course module the notebooks import and reads every data file they read (the pairs, the
  held-out split, the gold alignments, the key/value-cache benchmark) through the lessons' own
  functions, recording every file opened: each must be in the clone (or Python's own
  installation, or the empty cache), so no file the lessons need is missing from git, and
  nothing outside the clone is read;
- checks that every file a lesson or exercise notebook links to (figures) is in the clone, and
  that the working tree has no git-ignored file where the lessons read (``assets/``, ``utils/``,
  ``chapters/``), which a clone would lack.

The lessons themselves run under strict nbval in both lanes of `make test` (lesson 4 with the
shipped translation models); a third run of lesson 4 here, in the clone, proved nothing these
checks do not (its files and models come from the clone) and cost two minutes.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO

# Loaded by every Python process of the clone (tests, kernels): refuse any connection or name
# look-up that leaves the machine. Jupyter's kernels talk over loopback sockets, which stay open.
NO_NETWORK = textwrap.dedent('''
    import sys

    LOCAL = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "", None}

    def _refuse_network(event, args):
        if event == "socket.getaddrinfo" and args[0] not in LOCAL:
            raise OSError(f"fresh-clone test: no network (look-up of {args[0]!r})")
        if event == "socket.connect":
            address = args[1]
            if isinstance(address, tuple) and address[0] not in LOCAL:
                raise OSError(f"fresh-clone test: no network (connect to {address!r})")

    sys.addaudithook(_refuse_network)
''')

# Runs first in the clone: record every file opened from here on (an audit hook).
RECORD_OPENED_FILES = textwrap.dedent('''
    import json, os, pathlib, sys

    opened = set()

    def _record(event, args):
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            opened.add(os.path.realpath(os.fsdecode(args[0])))

    sys.addaudithook(_record)
''')

# Runs in the clone: load every shipped model the way the lessons do; training is an error.
LOAD_EVERY_SHIPPED_MODEL = textwrap.dedent('''
    import pathlib, sys, time
    import utils
    from utils import induction, lm_training, seq2seq, shipped_models, transformer
    from utils.data import find_data_file

    clone = pathlib.Path(sys.argv[1]).resolve()
    assert pathlib.Path(utils.__file__).resolve().is_relative_to(clone), utils.__file__
    assert find_data_file() == clone / "assets" / "data" / "fra-eng.txt", find_data_file()

    def refuse(*args, **kwargs):
        raise AssertionError("a shipped model was not found: the lesson would train it")

    seq2seq.train_bahdanau = transformer.train_transformer = refuse
    lm_training.train_language_model = induction.train_run = refuse
    loaders = {"bahdanau": seq2seq.train_or_load_bahdanau,
               "transformer": transformer.train_or_load_transformer,
               "language_model": lm_training.train_or_load_language_model}
    for name, (kind, config, _, _) in shipped_models.presets().items():
        start = time.perf_counter()
        *_, file, from_cache = loaders[kind](config, animate=False, show_progress=False)
        print(f"{name}: {file.relative_to(clone)} from_cache={from_cache} "
              f"{time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    _, file, from_cache = induction.train_or_load_induction()
    print(f"induction: {file.relative_to(clone)} from_cache={from_cache} "
          f"{time.perf_counter() - start:.1f} s")
''')


def _changed_files() -> list:
    """Tracked files changed on disk and new files not ignored (relative paths)."""
    out = subprocess.run(["git", "status", "--porcelain", "-z", "--untracked-files=all"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    paths = []
    for entry in filter(None, out.split("\0")):
        status, path = entry[:2], entry[3:]
        if "D" not in status and (REPO / path).is_file():
            paths.append(path)
    return paths


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """The repository cloned into an empty folder, with the working tree's changes on top."""
    if shutil.which("git") is None:
        pytest.fail("git is needed to clone the repository; install git")
    empty = tmp_path_factory.mktemp("empty")
    target = empty / "attention-course"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(target)],
                   check=True, timeout=300)
    for path in _changed_files():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / path, target / path)
    assert sorted(p.name for p in empty.iterdir()) == ["attention-course"]   # nothing beside it
    return target


@pytest.fixture(scope="module")
def clone_env(clone, tmp_path_factory):
    """No data variables, an empty course cache, no network, the clone's code first."""
    hooks = tmp_path_factory.mktemp("no-network")
    (hooks / "sitecustomize.py").write_text(NO_NETWORK)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("ATTENTION_COURSE_") and key not in ("PYTHONPATH", "PWD")}
    env.update({"PYTHONPATH": f"{clone}{os.pathsep}{hooks}",
                "ATTENTION_COURSE_CACHE": str(tmp_path_factory.mktemp("empty-cache")),
                "MPLCONFIGDIR": str(tmp_path_factory.mktemp("mpl")),
                "PYTHONDONTWRITEBYTECODE": "1"})
    return env


def test_the_network_guard_refuses_a_connection(clone, clone_env):
    """The guard must be able to fail: a look-up of an outside host is refused in the clone."""
    code = ("import urllib.request\n"
            "try:\n    urllib.request.urlopen('http://example.org/', timeout=5)\n"
            "except OSError as error:\n    print('refused' if 'no network' in str(error) "
            "else f'other error: {error}')\n"
            "else:\n    print('connected')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=clone, env=clone_env,
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "refused", result.stdout + result.stderr


@pytest.fixture(scope="module")
def clone_run(clone, clone_env):
    """One Python process in the clone (torch imported once): it records every file opened,
    loads every shipped model, then reads what the lessons read. Its stdout's lines."""
    modules = notebook_imports(clone)
    assert {"utils.seq2seq", "utils.widgets.bahdanau", "utils.alignment"} <= set(modules), modules
    script = RECORD_OPENED_FILES + LOAD_EVERY_SHIPPED_MODEL + READ_WHAT_THE_LESSONS_READ
    result = subprocess.run([sys.executable, "-c", script, str(clone), json.dumps(modules)],
                            cwd=clone, env=clone_env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout.strip().splitlines()


def test_every_shipped_model_loads_from_the_clone_without_training(clone, clone_run):
    lines = [line for line in clone_run if not line.startswith("{")]
    print("\n".join(lines))
    from utils.shipped_models import presets
    assert len(lines) == len(presets()) + 1
    for line in lines:
        name, where = line.split(": ", 1)
        assert where.startswith("assets/models/") and "from_cache=True" in where, line
    models = sorted(p.name for p in (clone / "assets" / "models").glob("*.pt"))
    assert len(models) == len(lines), models          # every shipped file is used, none missing


# Runs in the clone after the models: import what the notebooks import, read what the lessons
# read, through their own functions; print every file opened since the start as JSON:
# {"opened": [...], "allowed": [...]}.
READ_WHAT_THE_LESSONS_READ = textwrap.dedent('''
    import importlib
    for name in json.loads(sys.argv[2]):      # the modules the notebooks import
        importlib.import_module(name)

    from utils.data import read_pairs
    from utils.gold_alignment import load_gold
    from utils.heldout import heldout_pairs
    from utils.lm_training import LESSON_LM, lm_sentences
    from utils.static_cache import kv_cache_sweep
    from utils.seq2seq import BahdanauConfig
    from utils.training import training_pairs

    assert len(read_pairs()) > 10_000 and len(training_pairs(BahdanauConfig())) == 600
    assert len(heldout_pairs()) > 1_000
    assert len(load_gold()) > 100
    assert kv_cache_sweep()["lengths"]
    assert lm_sentences(LESSON_LM).train
    roots = {clone, pathlib.Path(sys.prefix), pathlib.Path(sys.base_prefix),
             pathlib.Path(sys.exec_prefix), pathlib.Path(os.environ["ATTENTION_COURSE_CACHE"]),
             pathlib.Path(os.environ["MPLCONFIGDIR"])}
    print(json.dumps({"opened": sorted(opened),
                      "allowed": sorted(os.path.realpath(r) for r in roots)}))
''')
# Files of the operating system itself that any Python program may read.
SYSTEM_DIRS = ("/dev/", "/proc/", "/sys/", "/etc/", "/usr/", "/lib/", "/lib64/")


# An import of a course module in a notebook's code: "from utils.x import ..." or "import utils.x".
UTILS_IMPORT = re.compile(r"^\s*(?:from|import)\s+(utils(?:\.\w+)*)", re.MULTILINE)


def notebook_imports(clone) -> list:
    """The course modules that the clone's lesson and exercise notebooks import."""
    import nbformat
    names = set()
    for notebook in clone.glob("chapters/*/*.ipynb"):
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type == "code":
                names |= set(UTILS_IMPORT.findall(cell.source))
    return sorted(names)


def test_the_lessons_read_only_files_of_the_clone(clone, clone_run):
    report = json.loads(clone_run[-1])
    allowed = tuple(root.rstrip("/") + "/" for root in report["allowed"])
    outside = [path for path in report["opened"]
               if not path.startswith(allowed + SYSTEM_DIRS)]
    assert not outside, f"files read from outside the clone: {outside}"
    opened = {pathlib.Path(path) for path in report["opened"]}
    clone = clone.resolve()
    for needed in ("assets/data/fra-eng.txt", "assets/alignment/gold.txt",
                   "assets/benchmarks/kv_cache.json", "utils/widgets/bahdanau.py"):
        assert clone / needed in opened, f"{needed} was not read from the clone"


# A link or picture in a notebook's markdown: [text](target) or <img src="target">.
LINK = re.compile(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)|src="([^"]+)"')


def test_every_file_the_notebooks_link_to_is_in_the_clone(clone):
    import nbformat
    notebooks = sorted(clone.glob("chapters/*/*.ipynb"))
    assert len(notebooks) >= 16, notebooks
    checked, missing = 0, []
    for notebook in notebooks:
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            for match in LINK.finditer(cell.source):
                target = (match.group(1) or match.group(2)).split("#")[0]
                if not target or re.match(r"^(https?|mailto|data):", target):
                    continue
                checked += 1
                if not (notebook.parent / target).exists():
                    missing.append(f"{notebook.relative_to(clone)}: {target}")
    assert checked >= 10, f"only {checked} local links found: is the pattern still right?"
    assert not missing, f"linked files missing from the clone: {missing}"


def test_no_ignored_file_lies_where_the_lessons_read():
    """An ignored file under assets/, utils/ or chapters/ would be on this disk but not in a
    clone: the lessons could depend on it unseen. Caches (bytecode, checkpoints) do not count."""
    listing = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard",
                              "--", "assets", "utils", "chapters"],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout
    ignored = [path for path in listing.splitlines()
               if not re.search(r"(^|/)(__pycache__|\.ipynb_checkpoints)/|\.pyc$", path)]
    assert not ignored, f"git-ignored files where the lessons read: {ignored}"


def test_make_falls_back_to_python3_and_says_which(tmp_path):
    """Without python3.11 on the PATH the Makefile builds the venv with python3."""
    make = shutil.which("make")
    if make is None:
        pytest.fail("GNU make is needed for the README's commands; install make")
    for names, expected in ((["python3"], "python3 -m venv"),
                            (["python3", "python3.11"], "python3.11 -m venv")):
        bin_dir = tmp_path / "-".join(names)
        bin_dir.mkdir()
        for name in names:
            (bin_dir / name).symlink_to(sys.executable)
        result = subprocess.run([make, "-n", "-B", "-C", str(REPO), "setup"],
                                env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert expected in result.stdout, result.stdout
        assert "Python %d.%d" in result.stdout             # the found version is printed
