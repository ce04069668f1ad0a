"""Tests of utils.data and utils.data_files: preprocessing, Vocab, batching, the search order,
the course's own file (the default, checked by sha256) and the download of the larger file that
only ``dataset="d2l-full"`` asks for.

Nothing here touches the internet: every test runs with an empty cache under tmp_path and the
download URL pointed at 127.0.0.1 (a local server the test starts, or a closed port).
"""

import hashlib
import http.server
import io
import socket
import subprocess
import sys
import threading
import zipfile

import pytest
import torch

from tests.conftest import REPO
from utils import data, data_files
from utils.data import (Vocab, build_array, find_data_file, load_data_nmt, preprocess,
                        read_pairs, tokenize, truncate_pad)


# --------------------------------------------------------------------------- helpers

def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/fra-eng.zip"


def make_zip(text: str, member: str = "fra-eng/fra.txt") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(member, text)
    return buffer.getvalue()


def sha1(payload: bytes) -> str:
    return hashlib.sha1(payload).hexdigest()


class ZipServer:
    """Serves ``payload`` at every path on 127.0.0.1 and counts the requests."""

    def __init__(self):
        self.payload = b""
        self.requests = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/zip")
                self.send_header("Content-Length", str(len(server.payload)))
                self.end_headers()
                self.wfile.write(server.payload)

            def log_message(self, *args):  # keep pytest output clean
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/fra-eng.zip"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def zip_server():
    server = ZipServer()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, tmp_path):
    """Empty cache under tmp_path, no data env var, downloads pointed at a closed local port."""
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    monkeypatch.delenv(data.DATASET_ENV_VAR, raising=False)
    monkeypatch.delenv("ATTENTION_COURSE_CACHE", raising=False)   # the XDG rules are tested here
    monkeypatch.setenv(data.URL_ENV_VAR, closed_port_url())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "xdg-cache" / "attention-course"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- preprocessing

@pytest.mark.parametrize("raw, expected", [
    ("Go.", "go ."),
    ("Va\u00a0!", "va !"),                     # no-break space -> space, no second space added
    ("Cours\u202f!", "cours !"),               # narrow no-break space
    ("Recule\u2009!", "recule !"),             # thin space
    ("Hello,world. Now!", "hello ,world . now !"),
    ("Wait ...", "wait . . ."),                # a "." after a "." follows a non-space too
    ("Really?!", "really ? !"),
    ("!", "!"),                                # nothing to put a space before
    ("ÇA VA ?", "ça va ?"),
])
def test_preprocess(raw, expected):
    assert preprocess(raw) == expected


def test_tokenize_splits_on_spaces_and_drops_empty_tokens():
    assert tokenize("qui est cette fille  ?") == ["qui", "est", "cette", "fille", "?"]
    assert tokenize("go .") == ["go", "."]
    assert tokenize("") == []


# --------------------------------------------------------------------------- Vocab

def test_vocab_reserved_tokens_come_first_and_unk_is_zero():
    vocab = Vocab([["b", "a"], ["a"]])
    assert vocab.idx_to_token[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    assert (vocab.unk, vocab.pad, vocab["<bos>"], vocab["<eos>"]) == (0, 1, 2, 3)
    assert len(vocab) == 6


def test_vocab_orders_by_frequency_then_first_appearance():
    vocab = Vocab([["c", "b", "a", "b"], ["a", "d", "a"]])
    # a x3, b x2, then c and d once each, c seen first.
    assert vocab.idx_to_token[4:] == ["a", "b", "c", "d"]
    assert vocab.token_freqs == [("a", 3), ("b", 2), ("c", 1), ("d", 1)]


def test_vocab_min_freq_and_unknown_tokens():
    vocab = Vocab([["x", "x", "y"]], min_freq=2)
    assert "y" not in vocab.idx_to_token
    assert vocab["y"] == vocab.unk == 0
    assert vocab["never seen"] == 0
    assert vocab[["x", "y", "<eos>"]] == [4, 0, 3]
    assert vocab[("x",)] == [4]


def test_vocab_to_tokens_round_trip_and_bad_indices():
    vocab = Vocab([["hello", "world", "hello"]])
    indices = vocab[["hello", "world"]]
    assert vocab.to_tokens(indices) == ["hello", "world"]
    assert vocab.to_tokens(torch.tensor(indices)) == ["hello", "world"]
    assert vocab.to_tokens(0) == "<unk>"
    with pytest.raises(IndexError, match="outside this vocabulary of 6 tokens"):
        vocab.to_tokens(6)
    with pytest.raises(IndexError):
        vocab.to_tokens(-1)
    with pytest.raises(TypeError):
        vocab[3]


@pytest.mark.parametrize("min_freq", [-1, 1.5, "2"])
def test_vocab_rejects_bad_min_freq(min_freq):
    with pytest.raises(ValueError, match="min_freq"):
        Vocab([["a"]], min_freq=min_freq)


def test_vocab_without_pad_says_so():
    vocab = Vocab(["a"], reserved_tokens=())
    assert len(vocab) == 2
    with pytest.raises(AttributeError, match="<pad>"):
        vocab.pad


# --------------------------------------------------------------------------- arrays

def test_truncate_pad():
    assert truncate_pad([5, 6], 4, 1) == [5, 6, 1, 1]
    assert truncate_pad([5, 6, 7, 8, 9], 3, 1) == [5, 6, 7]
    assert truncate_pad([5, 6, 7], 3, 1) == [5, 6, 7]
    with pytest.raises(ValueError, match="num_steps"):
        truncate_pad([5], 0, 1)


def test_build_array_appends_eos_pads_and_counts_truncation():
    vocab = Vocab([["a", "b", "c"]])
    a, b, c = vocab[["a", "b", "c"]]
    eos, pad = vocab["<eos>"], vocab.pad
    array, valid_len, truncated = build_array([["a"], ["a", "b", "c"]], vocab, num_steps=3)
    assert array.tolist() == [[a, eos, pad], [a, b, c]]
    assert valid_len.tolist() == [2, 3]
    assert truncated == 1                       # the second line lost its <eos>
    with pytest.raises(ValueError, match="sentence 1 is empty"):
        build_array([["a"], []], vocab, num_steps=3)


# --------------------------------------------------------------------------- the course file

def test_read_pairs_of_the_course_file(course_pairs_file):
    with open(course_pairs_file, encoding="utf-8") as f:
        lines = f.read().splitlines()
    pairs = read_pairs(course_pairs_file)
    assert len(pairs) == len(lines) == 18065
    assert pairs[0] == ("go .", "va !")
    raw = read_pairs(course_pairs_file, num_examples=3, preprocess_text=False)
    assert raw == [tuple(line.split("\t")) for line in lines[:3]]
    assert raw[0] == ("Go.", "Va !")
    assert read_pairs(course_pairs_file, num_examples=600) == pairs[:600]


@pytest.mark.parametrize("num_examples, message", [
    (0, "positive int"), (-5, "positive int"), (2.0, "positive int"),
    (18066, "holds only 18065 pairs"),
])
def test_read_pairs_rejects_bad_num_examples(course_pairs_file, num_examples, message):
    with pytest.raises(ValueError, match=message):
        read_pairs(course_pairs_file, num_examples=num_examples)


def batches(data_iter):
    return [tuple(t.clone() for t in batch) for batch in data_iter]


def test_load_data_nmt_shapes_and_valid_lengths(course_pairs_file):
    batch_size, num_steps = 64, 10
    data_iter, src_vocab, tgt_vocab = load_data_nmt(batch_size, num_steps,
                                                    path=course_pairs_file)
    seen = 0
    for src, src_len, tgt, tgt_len in data_iter:
        assert src.shape[1] == tgt.shape[1] == num_steps
        assert src.shape[0] <= batch_size and src_len.shape == (src.shape[0],)
        assert src.dtype == tgt.dtype == torch.long
        for array, lens, vocab in ((src, src_len, src_vocab), (tgt, tgt_len, tgt_vocab)):
            positions = torch.arange(num_steps)[None, :]              # (1, num_steps)
            is_pad = array == vocab.pad
            assert torch.equal(is_pad, positions >= lens[:, None])    # pads exactly after valid_len
            assert (lens >= 2).all()                                  # a word and <eos> at least
            last = array[torch.arange(len(lens)), lens - 1]
            assert (last == vocab["<eos>"]).all()                     # nothing truncated at 10
        seen += src.shape[0]
    assert seen == 600
    assert data_iter.num_truncated == {"source": 0, "target": 0}
    # The first pair, "go ." -> "va !", is in there, encoded word by word.
    src_all, _, tgt_all, _ = data_iter.dataset.tensors
    assert src_vocab.to_tokens(src_all[0][:3]) == ["go", ".", "<eos>"]
    assert tgt_vocab.to_tokens(tgt_all[0][:3]) == ["va", "!", "<eos>"]


def test_load_data_nmt_vocab_respects_min_freq(course_pairs_file):
    _, src_vocab, _ = load_data_nmt(8, 10, num_examples=600, path=course_pairs_file, min_freq=2)
    _, src_vocab_all, _ = load_data_nmt(8, 10, num_examples=600, path=course_pairs_file,
                                        min_freq=0)
    counts = {}
    for english, _ in read_pairs(course_pairs_file, num_examples=600):
        for token in english.split():
            counts[token] = counts.get(token, 0) + 1
    assert len(src_vocab_all) == 4 + len(counts)
    assert len(src_vocab) == 4 + sum(1 for c in counts.values() if c >= 2)


def test_load_data_nmt_is_deterministic_per_seed(course_pairs_file):
    first = batches(load_data_nmt(32, 10, path=course_pairs_file, seed=1)[0])
    again = batches(load_data_nmt(32, 10, path=course_pairs_file, seed=1)[0])
    other = batches(load_data_nmt(32, 10, path=course_pairs_file, seed=2)[0])
    assert all(torch.equal(x, y) for b1, b2 in zip(first, again) for x, y in zip(b1, b2))
    assert not torch.equal(first[0][0], other[0][0])
    # Same examples, different order.
    rows = lambda bs: sorted(map(tuple, torch.cat([b[0] for b in bs]).tolist()))
    assert rows(first) == rows(other)


def test_load_data_nmt_reports_truncation(course_pairs_file):
    num_steps = 3
    with pytest.warns(UserWarning, match="truncated"):
        data_iter, _, _ = load_data_nmt(16, num_steps, num_examples=100, path=course_pairs_file)
    pairs = read_pairs(course_pairs_file, num_examples=100)
    expected_src = sum(len(english.split()) + 1 > num_steps for english, _ in pairs)
    expected_tgt = sum(len(french.split()) + 1 > num_steps for _, french in pairs)
    assert expected_tgt > 0
    assert data_iter.num_truncated == {"source": expected_src, "target": expected_tgt}


def test_load_data_nmt_rejects_bad_arguments(course_pairs_file):
    with pytest.raises(ValueError, match="batch_size"):
        load_data_nmt(0, 8, path=course_pairs_file)
    with pytest.raises(ValueError, match="num_steps"):
        load_data_nmt(2, 0, path=course_pairs_file)
    with pytest.raises(ValueError, match="num_examples"):
        load_data_nmt(2, 8, num_examples=0, path=course_pairs_file)


# --------------------------------------------------------------------------- malformed files

@pytest.mark.parametrize("text, line_no, what", [
    ("Hi.\tSalut !\nno tab on this line\n", 2, "no tab"),
    ("Hi.\tSalut !\nGo.\tVa !\nBye.\t \n", 3, "French sentence is empty"),
    ("\tSalut !\n", 1, "English sentence is empty"),
    ("Hi.\tSalut !\n\nGo.\tVa !\n", 2, "line is empty"),
])
def test_malformed_line_names_file_and_line(tmp_path, text, line_no, what):
    path = write(tmp_path / "bad.txt", text)
    with pytest.raises(ValueError, match=what) as info:
        read_pairs(path)
    assert f"{path}, line {line_no}:" in str(info.value)


def test_extra_columns_are_ignored(tmp_path):
    path = write(tmp_path / "anki.txt", "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org\n")
    assert read_pairs(path) == [("go .", "va !")]


# --------------------------------------------------------------------------- search order

COURSE_SHA256 = "c52ae3c5a2f6b3c96d985aad8e2f1aab814c6701cfa9face467989069624bcaa"


def test_the_course_file_ships_in_the_repository_byte_for_byte():
    """The file the shipped models were trained on: its sha256 is the README's."""
    file = REPO / "assets" / "data" / "fra-eng.txt"
    assert hashlib.sha256(file.read_bytes()).hexdigest() == COURSE_SHA256
    assert data_files.COURSE_SHA256 == COURSE_SHA256
    assert COURSE_SHA256 in (REPO / "README.md").read_text(encoding="utf-8")
    notes = (REPO / "assets" / "data" / "README.md").read_text(encoding="utf-8")
    assert COURSE_SHA256 in notes and "Tatoeba" in notes and "CC-BY 2.0" in notes
    # Git must not rewrite its line ends on any platform (that would change the checksum).
    attributes = (REPO / ".gitattributes").read_text(encoding="utf-8")
    assert "assets/data/fra-eng.txt -text" in attributes


def test_default_is_the_course_file_with_nothing_set(isolated_env):
    assert find_data_file() == REPO / "assets" / "data" / "fra-eng.txt"
    assert find_data_file(dataset="course") == find_data_file()
    assert len(read_pairs()) == 18065
    assert not isolated_env.exists()                       # nothing cached, nothing downloaded


def test_explicit_path_beats_env_var_beats_course_file(tmp_path, monkeypatch):
    explicit = write(tmp_path / "explicit.txt", "Explicit.\tExplicite.\n")
    from_env = write(tmp_path / "env.txt", "Env.\tEnv.\n")
    monkeypatch.setenv(data.DATA_ENV_VAR, str(from_env))

    assert find_data_file(explicit) == explicit
    assert read_pairs(explicit) == [("explicit .", "explicite .")]
    assert find_data_file() == from_env
    assert find_data_file(dataset="d2l-full") == from_env    # a named file always wins
    assert read_pairs() == [("env .", "env .")]
    monkeypatch.delenv(data.DATA_ENV_VAR)
    assert find_data_file() == data_files.COURSE_FILE


def test_an_old_cached_download_is_not_used_by_default(isolated_env):
    """Before the course shipped its file, the download was cached as fra.txt: never read now."""
    write(isolated_env / "fra.txt", "Cache.\tCache.\n")
    write(isolated_env / "d2l-full" / "fra.txt", "Full.\tComplet.\n")
    assert find_data_file() == data_files.COURSE_FILE
    assert read_pairs(num_examples=1) == [("go .", "va !")]


def test_course_cache_variable_wins_over_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / "own"))
    cached = write(tmp_path / "own" / "d2l-full" / "fra.txt", "Own .\tPropre .\n")
    assert data.cache_dir() == tmp_path / "own"
    assert find_data_file(dataset="d2l-full") == cached


def test_cache_falls_back_to_home_dot_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME")
    cached = write(tmp_path / "home" / ".cache" / "attention-course" / "d2l-full" / "fra.txt",
                   "A.\tB.\n")
    assert data.cache_dir() == tmp_path / "home" / ".cache" / "attention-course"
    assert find_data_file(dataset="d2l-full") == cached


def test_dataset_can_be_named_by_variable(monkeypatch, isolated_env):
    cached = write(isolated_env / "d2l-full" / "fra.txt", "Full.\tComplet.\n")
    monkeypatch.setenv(data.DATASET_ENV_VAR, "d2l-full")
    assert find_data_file() == cached
    assert read_pairs() == [("full .", "complet .")]
    monkeypatch.setenv(data.DATASET_ENV_VAR, "d2l")
    with pytest.raises(ValueError, match=r"\$ATTENTION_COURSE_DATASET is 'd2l'.*'course', "
                                         r"'d2l-full'") as info:
        find_data_file()
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="the dataset argument is 'full'"):
        find_data_file(dataset="full")


def _course_copy(tmp_path, monkeypatch, text=None):
    """Point utils.data_files at a copy of the course file (optionally with other text)."""
    copy = tmp_path / "repo" / "assets" / "data" / "fra-eng.txt"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(data_files.COURSE_FILE.read_bytes() if text is None else text.encode())
    monkeypatch.setattr(data_files, "COURSE_FILE", copy)
    return copy


def test_an_altered_course_file_is_refused_with_the_fix(tmp_path, monkeypatch):
    copy = _course_copy(tmp_path, monkeypatch)
    assert find_data_file() == copy
    with open(copy, "ab") as f:
        f.write(b"One more.\tUne de plus.\n")
    with pytest.raises(ValueError) as info:
        read_pairs()
    message = str(info.value)
    assert "have been changed" in message and COURSE_SHA256[:12] in message
    assert "git checkout -- assets/data/fra-eng.txt" in message
    assert "ATTENTION_COURSE_DATA" in message and "\n" not in message


def test_a_missing_course_file_says_how_to_restore_it(tmp_path, monkeypatch, isolated_env):
    copy = _course_copy(tmp_path, monkeypatch)
    copy.unlink()
    with pytest.raises(FileNotFoundError) as info:
        read_pairs()
    message = str(info.value)
    assert str(copy) in message and "git checkout -- assets/data/fra-eng.txt" in message
    assert "\n" not in message
    assert not isolated_env.exists()                       # no download was attempted


def test_named_file_that_is_missing_is_an_error_not_a_fallback(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="path argument points at .*does not exist"):
        find_data_file(tmp_path / "nope.txt")
    monkeypatch.setenv(data.DATA_ENV_VAR, str(tmp_path / "nope.txt"))
    with pytest.raises(FileNotFoundError, match=r"\$ATTENTION_COURSE_DATA points at"):
        read_pairs()
    monkeypatch.setenv(data.DATA_ENV_VAR, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="folder"):
        read_pairs()


def test_full_dataset_with_download_disabled_says_where_it_looked(isolated_env):
    with pytest.raises(FileNotFoundError) as info:
        find_data_file(dataset="d2l-full", download=False)
    message = str(info.value)
    assert str(isolated_env / "d2l-full" / "fra.txt") in message and "download=False" in message
    assert "\n" not in message


def test_full_dataset_with_unreachable_server_names_the_url(isolated_env):
    url = closed_port_url()
    with pytest.raises(FileNotFoundError) as info:
        find_data_file(dataset="d2l-full", url=url)
    message = str(info.value)
    for place in (str(isolated_env / "d2l-full" / "fra.txt"), url, "course's own pairs"):
        assert place in message
    assert "\n" not in message
    assert not (isolated_env / "d2l-full" / "fra-eng.zip").exists()
    assert not (isolated_env / "d2l-full" / "fra-eng.zip.part").exists()


# --------------------------------------------------------------------------- download

TEXT = "Go.\tVa !\nHi.\tSalut !\nRun!\tCours\u202f!\nWow!\tÇa alors\u202f!\n"


def test_download_verifies_extracts_caches_and_is_reused(zip_server, isolated_env, monkeypatch):
    zip_server.payload = make_zip(TEXT)
    path = find_data_file(dataset="d2l-full", url=zip_server.url, sha1=sha1(zip_server.payload))
    assert zip_server.requests == 1
    assert path == isolated_env / "d2l-full" / "fra.txt"
    assert path.read_text(encoding="utf-8") == TEXT
    # Read when the data set is named, and not downloaded again.
    monkeypatch.setenv(data.DATASET_ENV_VAR, "d2l-full")
    assert read_pairs() == [("go .", "va !"), ("hi .", "salut !"), ("run !", "cours !"),
                            ("wow !", "ça alors !")]
    data_iter, src_vocab, _ = load_data_nmt(2, 4, num_examples=4, min_freq=1)
    assert sum(batch[0].shape[0] for batch in data_iter) == 4
    assert "wow" in src_vocab.idx_to_token
    assert find_data_file(url=zip_server.url, sha1=sha1(zip_server.payload)) == path
    assert zip_server.requests == 1
    # Unnamed, the course's own file is read again.
    monkeypatch.delenv(data.DATASET_ENV_VAR)
    assert len(read_pairs()) == 18065


def test_nothing_downloads_unless_the_full_dataset_is_named(zip_server, monkeypatch):
    zip_server.payload = make_zip(TEXT)
    monkeypatch.setenv(data.URL_ENV_VAR, zip_server.url)
    read_pairs()
    find_data_file(dataset="course")
    assert zip_server.requests == 0


def test_download_url_comes_from_env_var(zip_server, monkeypatch, isolated_env):
    zip_server.payload = make_zip(TEXT)
    monkeypatch.setenv(data.URL_ENV_VAR, zip_server.url)
    assert (find_data_file(dataset="d2l-full", sha1=sha1(zip_server.payload))
            == isolated_env / "d2l-full" / "fra.txt")
    assert zip_server.requests == 1


def test_corrupt_download_is_refused_and_kept_aside(zip_server, isolated_env):
    zip_server.payload = make_zip(TEXT)
    wrong = "0" * 40
    folder = isolated_env / "d2l-full"
    with pytest.raises(ValueError, match="checksum mismatch") as info:
        find_data_file(dataset="d2l-full", url=zip_server.url, sha1=wrong)
    corrupt = folder / "fra-eng.zip.corrupt"
    assert str(corrupt) in str(info.value) and "\n" not in str(info.value)
    assert corrupt.read_bytes() == zip_server.payload
    assert not (folder / "fra.txt").exists()                # nothing extracted
    assert not (folder / "fra-eng.zip").exists()
    # A retry with the right checksum downloads afresh and succeeds.
    assert find_data_file(dataset="d2l-full", url=zip_server.url,
                          sha1=sha1(zip_server.payload)).is_file()
    assert zip_server.requests == 2


def test_default_checksum_is_the_d2l_archive(zip_server, isolated_env):
    zip_server.payload = make_zip(TEXT)                     # not the real archive
    with pytest.raises(ValueError, match="expected 94646ad1522d915e7b0f9296181140edcf86a4f5"):
        find_data_file(dataset="d2l-full", url=zip_server.url)
    assert not (isolated_env / "d2l-full" / "fra.txt").exists()


def test_archive_without_the_expected_member_is_refused(zip_server, isolated_env):
    zip_server.payload = make_zip(TEXT, member="other/file.txt")
    with pytest.raises(ValueError, match="no member 'fra-eng/fra.txt'"):
        find_data_file(dataset="d2l-full", url=zip_server.url, sha1=sha1(zip_server.payload))
    assert not (isolated_env / "d2l-full" / "fra.txt").exists()


# --------------------------------------------------------------------------- import is inert

def test_import_touches_no_network_and_creates_no_cache(tmp_path):
    code = (
        "import sys\n"
        "def guard(event, args):\n"
        "    if event.startswith(('socket.', 'urllib.')):\n"
        "        raise AssertionError(f'network during import: {event} {args}')\n"
        "sys.addaudithook(guard)\n"
        "import utils.data\n"
        "print('ok')\n"
    )
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path),
           "PATH": "/usr/bin:/bin", "ATTENTION_COURSE_DATA_URL": "http://127.0.0.1:9/x.zip"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert not (tmp_path / "cache").exists()
