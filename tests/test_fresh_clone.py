"""A fresh clone works with nothing beside it: no ``../shared``, no data variable, no network.

The repository is cloned into an empty temporary folder (uncommitted changes of the working tree
are copied over it, so the test checks what is on disk; on CI the tree is clean and the clone is
exactly ``main``). In that clone, with the data variables unset, an empty course cache and every
network connection refused (an audit hook that every Python process of the clone loads through
``sitecustomize``), it

- loads every shipped model through the lessons' own functions, with training replaced by an
  error, and checks that each one comes from the clone's ``assets/models/``;
- runs lesson 4, which loads the shipped translation models, under strict nbval.
"""

import os
import pathlib
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


def test_every_shipped_model_loads_from_the_clone_without_training(clone, clone_env):
    result = subprocess.run([sys.executable, "-c", LOAD_EVERY_SHIPPED_MODEL, str(clone)],
                            cwd=clone, env=clone_env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    print("\n".join(lines))
    from utils.shipped_models import presets
    assert len(lines) == len(presets()) + 1
    for line in lines:
        name, where = line.split(": ", 1)
        assert where.startswith("assets/models/") and "from_cache=True" in where, line
    models = sorted(p.name for p in (clone / "assets" / "models").glob("*.pt"))
    assert len(models) == len(lines), models          # every shipped file is used, none missing


def test_lesson_4_passes_strict_nbval_in_the_clone(clone, clone_env):
    lesson = "chapters/04_bahdanau_attention/lesson.ipynb"
    command = [sys.executable, "-m", "pytest", lesson, "--nbval", "--nbval-current-env",
               "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-p", "no:cacheprovider",
               "-q"]
    result = subprocess.run(command, cwd=clone, env=clone_env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


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
