"""Where the English–French sentence pairs come from: find, verify and (only on request) download.

``find_data_file`` decides which file ``utils.data`` reads; first match wins:

1. an explicit ``path`` argument;
2. the environment variable ``ATTENTION_COURSE_DATA`` (path of a ``fra-eng.txt``/``fra.txt``);
3. the data set named by ``dataset`` (or ``$ATTENTION_COURSE_DATASET``; default ``"course"``):

   - ``"course"``: the course's own 18,065 pairs, ``assets/data/fra-eng.txt`` in the repository.
     Every shipped model was trained on exactly this file, so its sha256 is checked: a missing or
     altered file stops with the command that restores it. Nothing is downloaded.
   - ``"d2l-full"``: *Dive into Deep Learning*'s full ``fra-eng.zip`` (far larger). Downloaded
     only when asked for by this name, its sha1 checked before ``fra-eng/fra.txt`` is extracted
     into ``<course cache>/d2l-full/fra.txt``; the URL can be changed with the ``url`` argument or
     ``ATTENTION_COURSE_DATA_URL``. Its pairs differ, so every model trained on it has keys of
     its own (the keys hash the training pairs) and the lessons' figures change.

The sentences come from the Tatoeba Project (tatoeba.org), licence CC-BY 2.0 (France).

Which file is read does not decide a model's weights by itself: the pairs it holds do, and
``utils.model_cache`` hashes them into every key. So this module is not part of the models' code
fingerprint (``utils.code_fingerprint``). Importing it reads no file and touches no network.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import urllib.error
import urllib.request
import zipfile

from utils.i18n import _

DATA_ENV_VAR = "ATTENTION_COURSE_DATA"
DATASET_ENV_VAR = "ATTENTION_COURSE_DATASET"
URL_ENV_VAR = "ATTENTION_COURSE_DATA_URL"

REPO = pathlib.Path(__file__).resolve().parents[1]
COURSE_FILE = REPO / "assets" / "data" / "fra-eng.txt"
COURSE_FILE_IN_REPO = "assets/data/fra-eng.txt"
COURSE_SHA256 = "c52ae3c5a2f6b3c96d985aad8e2f1aab814c6701cfa9face467989069624bcaa"

DATA_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
DATA_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"
ARCHIVE_NAME = "fra-eng.zip"
ARCHIVE_MEMBER = "fra-eng/fra.txt"
CACHED_FILE = "fra.txt"
CACHE_SUBDIR = "attention-course"
FULL_SUBDIR = "d2l-full"
DOWNLOAD_TIMEOUT_S = 60

DATASETS = ("course", "d2l-full")


def cache_dir() -> pathlib.Path:
    """The course's cache folder: ``$ATTENTION_COURSE_CACHE`` if set (the tests set it to a
    folder of their own), else ``$XDG_CACHE_HOME/attention-course`` or
    ``~/.cache/attention-course``."""
    own = os.environ.get("ATTENTION_COURSE_CACHE")
    if own:
        return pathlib.Path(own)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / CACHE_SUBDIR


def full_data_dir() -> pathlib.Path:
    """Where the ``"d2l-full"`` archive and its extracted ``fra.txt`` are kept."""
    return cache_dir() / FULL_SUBDIR


def _check_user_file(path, origin: str) -> pathlib.Path:
    """A file the user named (argument or env var) must exist: never fall through silently."""
    path = pathlib.Path(path).expanduser()
    if path.is_dir():
        raise FileNotFoundError(_("{origin} points at the folder {path}; point it at the "
                                  "fra-eng.txt (or fra.txt) file inside it").format(
            origin=origin, path=path))
    if not path.is_file():
        raise FileNotFoundError(_("{origin} points at {path}, which does not exist; fix the "
                                  "path or leave it unset to use the course's "
                                  "{course_file}").format(
            origin=origin, path=path, course_file=COURSE_FILE_IN_REPO))
    return path


def _digest_of(path: pathlib.Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_VERIFIED: dict = {}     # (path, size, mtime_ns) -> sha256, so a file is hashed once per process


def _verified_course_file(file: pathlib.Path, expected: str) -> pathlib.Path:
    """``file`` if it is the course's file byte for byte; else a one-line error with the fix."""
    restore = _("restore it with 'git checkout -- {path}' in the course folder (or clone the "
                "course again)").format(path=COURSE_FILE_IN_REPO)
    if not file.is_file():
        raise FileNotFoundError(_("the course's sentence pairs {file} are missing; {restore}, or "
                                  "point ${variable} at a copy of fra-eng.txt").format(
            file=file, restore=restore, variable=DATA_ENV_VAR))
    stat = file.stat()
    key = (str(file), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        _VERIFIED[key] = _digest_of(file, "sha256")
    actual = _VERIFIED[key]
    if actual != expected:
        raise ValueError(_("the course's sentence pairs {file} have been changed (sha256 "
                           "{actual}…, expected {expected}…): the shipped models and the "
                           "lessons' figures are for the original; {restore}; to train on your "
                           "own pairs, save them elsewhere and set ${variable} to that file "
                           "(the models then retrain)").format(
            file=file, actual=actual[:12], expected=expected[:12], restore=restore,
            variable=DATA_ENV_VAR))
    return file


def _verify_archive(archive: pathlib.Path, sha1: str) -> None:
    """Refuse an archive whose sha1 is wrong: move it aside to ``<name>.corrupt`` and raise."""
    actual = _digest_of(archive, "sha1")
    if actual != sha1.lower():
        corrupt = archive.with_name(archive.name + ".corrupt")
        os.replace(archive, corrupt)
        raise ValueError(_("checksum mismatch for {name}: sha1 {actual}, expected {sha1}; "
                           "refused it and moved it to {corrupt} (nothing was extracted); delete "
                           "it and retry, or set {variable} to a local fra-eng.txt").format(
            name=archive.name, actual=actual, sha1=sha1, corrupt=corrupt,
            variable=DATA_ENV_VAR))


def _extract(archive: pathlib.Path, target: pathlib.Path) -> None:
    """Extract only ``fra-eng/fra.txt`` to ``target`` (written aside first, then renamed)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            if ARCHIVE_MEMBER not in zf.namelist():
                raise ValueError(_("{archive} has no member {member!r}; it is not the "
                                   "eng-fra archive this course expects").format(
                    archive=archive, member=ARCHIVE_MEMBER))
            partial = target.with_name(target.name + ".part")
            with zf.open(ARCHIVE_MEMBER) as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst)
    except zipfile.BadZipFile as err:
        raise ValueError(_("{archive} is not a valid zip file ({err}); delete it and retry").format(
            archive=archive, err=err)) from err
    os.replace(partial, target)


def _download(url: str, archive: pathlib.Path) -> None:
    """Fetch ``url`` into ``archive`` (through ``<name>.part`` so a broken transfer leaves no zip)."""
    partial = archive.with_name(archive.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response, \
                open(partial, "wb") as out:
            shutil.copyfileobj(response, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, archive)


def _full_data_file(url: str | None, sha1: str | None, download: bool) -> pathlib.Path:
    """The ``"d2l-full"`` file: the cached copy, else a checksum-verified download."""
    folder = full_data_dir()
    cached = folder / CACHED_FILE
    if cached.is_file():
        return cached
    archive = folder / ARCHIVE_NAME
    url = url or os.environ.get(URL_ENV_VAR) or DATA_URL
    sha1 = sha1 or DATA_SHA1
    looked = _("dataset 'd2l-full' not in the cache {cached}").format(cached=cached)
    fix = _("check your connection or {variable}, or use the course's own pairs (leave dataset "
            "unset)").format(variable=URL_ENV_VAR)
    if not archive.is_file():       # an archive left by an earlier run is verified, not refetched
        if not download:
            raise FileNotFoundError(_("{looked} and download=False; {fix}").format(
                looked=looked, fix=fix))
        folder.mkdir(parents=True, exist_ok=True)
        try:
            _download(url, archive)
        except (urllib.error.URLError, OSError, ValueError) as err:  # ValueError: bad URL
            reason = getattr(err, "reason", err)
            raise FileNotFoundError(_("{looked}, and the download from {url} failed ({reason}); "
                                      "{fix}").format(
                looked=looked, url=url, reason=reason, fix=fix)) from err
    _verify_archive(archive, sha1)  # before extraction, always
    _extract(archive, cached)
    return cached


def find_data_file(path=None, *, dataset: str | None = None, url: str | None = None,
                   sha1: str | None = None, download: bool = True) -> pathlib.Path:
    """Path of the eng-fra text file: ``path``, then ``$ATTENTION_COURSE_DATA``, then the data set
    ``dataset`` (default ``$ATTENTION_COURSE_DATASET`` or ``"course"``; see the module docstring).

    ``url``, ``sha1`` and ``download`` matter only for ``dataset="d2l-full"`` (``url`` defaults to
    ``$ATTENTION_COURSE_DATA_URL`` or ``DATA_URL``, ``sha1`` to ``DATA_SHA1``). Nothing is ever
    downloaded for the default data set.
    """
    if path is not None:
        return _check_user_file(path, _("the path argument"))
    env_path = os.environ.get(DATA_ENV_VAR)
    if env_path:
        return _check_user_file(env_path, f"${DATA_ENV_VAR}")
    origin = _("the dataset argument")
    if dataset is None:
        dataset = os.environ.get(DATASET_ENV_VAR) or "course"
        origin = f"${DATASET_ENV_VAR}"
    if dataset == "course":
        return _verified_course_file(COURSE_FILE, COURSE_SHA256)
    if dataset == "d2l-full":
        return _full_data_file(url, sha1, download)
    raise ValueError(_("{origin} is {dataset!r}, not a data set of the course; choose one of "
                       "{choices} or leave it unset for 'course'").format(
        origin=origin, dataset=dataset, choices=', '.join(map(repr, DATASETS))))
