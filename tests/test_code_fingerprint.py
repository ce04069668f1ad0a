"""utils.code_fingerprint: the code part of every trained model's cache key."""

import pathlib
import textwrap

import pytest

from utils import seq2seq
from utils.code_fingerprint import (code_fingerprint, model_code_modules, module_path,
                                    source_fingerprint)
from utils.seq2seq import BahdanauConfig, train_or_load_bahdanau


def _fake_utils(root: pathlib.Path, a_source: str, b_source: str) -> pathlib.Path:
    utils_dir = root / "utils"
    utils_dir.mkdir(parents=True, exist_ok=True)
    (utils_dir / "__init__.py").write_text("")
    (utils_dir / "a.py").write_text(textwrap.dedent(a_source))
    (utils_dir / "b.py").write_text(textwrap.dedent(b_source))
    return utils_dir


def _fingerprint(utils_dir, start="utils.a"):
    return source_fingerprint(module_path(m, utils_dir) for m in model_code_modules(start, utils_dir))


A = '''
    """Module a."""
    from utils.b import double

    def train(x):
        """Train."""
        return double(x) + 1   # a comment
'''
B = '''
    def double(x):
        return 2 * x
'''


def test_comments_docstrings_and_layout_do_not_count_statements_do(tmp_path):
    base = _fingerprint(_fake_utils(tmp_path / "0", A, B))
    reworded = A.replace('"""Train."""', '"""Train the model, said differently."""')
    reworded = reworded.replace("# a comment", "# another comment").replace(" + 1", "+1")
    assert _fingerprint(_fake_utils(tmp_path / "1", reworded, B)) == base
    assert _fingerprint(_fake_utils(tmp_path / "2", A.replace("+ 1", "+ 2"), B)) != base
    # an edit in a module that a.py only imports changes a's fingerprint too
    assert _fingerprint(_fake_utils(tmp_path / "3", A, B.replace("2 * x", "x * 2"))) != base


def test_lazy_imports_count_and_tools_do_not(tmp_path):
    lazy = A.replace("from utils.b import double\n", "").replace(
        "return double(x) + 1", "from utils.b import double\n        return double(x) + 1")
    utils_dir = _fake_utils(tmp_path, lazy, B)
    assert model_code_modules("utils.a", utils_dir) == ["utils.a", "utils.b"]
    modules = model_code_modules("utils.seq2seq")
    assert {"utils.seq2seq", "utils.training", "utils.masking", "utils.attention",
            "utils.data"} <= set(modules)
    assert not {"utils.plotting", "utils.model_cache", "utils.shipped_models"} & set(modules)
    with pytest.raises(ValueError, match="is not a module"):
        model_code_modules("utils.no_such_module")


def test_every_model_kind_has_its_own_fingerprint():
    prints = {code_fingerprint(m) for m in ("utils.seq2seq", "utils.transformer",
                                            "utils.lm_training", "utils.induction")}
    assert len(prints) == 4 and all(len(p) == 20 for p in prints)


def test_a_model_cached_under_other_code_is_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_COURSE_CACHE", str(tmp_path / "cache"))
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("".join(f"go {i} .\tva {i} !\n" for i in range(40)))
    config = BahdanauConfig(num_examples=40, num_epochs=1, batch_size=16, embed_size=8,
                            num_hiddens=8, num_layers=1)
    first = train_or_load_bahdanau(config, pairs, animate=False, show_progress=False)
    assert train_or_load_bahdanau(config, pairs, animate=False, show_progress=False)[5] is True
    monkeypatch.setattr(seq2seq, "code_fingerprint", lambda module: "edited-code")
    again = train_or_load_bahdanau(config, pairs, animate=False, show_progress=False)
    assert again[5] is False and again[4] != first[4]                  # trained, new key


GUARDED = '''
    import warnings

    from utils.b import double
    from utils.i18n import _

    def train(x, steps):
        if x < 0:
            raise ValueError(f"x must be >= 0, got {x}")
        if steps > 10:
            warnings.warn(f"{steps} steps is many", UserWarning)
        assert steps > 0, "steps must be positive"
        return double(x) + 1
'''


def test_message_text_does_not_count_its_condition_and_class_do(tmp_path):
    base = _fingerprint(_fake_utils(tmp_path / "0", GUARDED, B))
    same = {
        "reworded": GUARDED.replace("x must be >= 0, got {x}", "x is negative ({x}); pass x >= 0"),
        "translated": GUARDED.replace('f"x must be >= 0, got {x}"',
                                      '_("x must be >= 0, got {x}").format(x=x)'),
        "translated in Chinese": GUARDED.replace('f"x must be >= 0, got {x}"',
                                                 '_("x 必须 >= 0，得到 {x}").format(x=x)'),
        "warning": GUARDED.replace('f"{steps} steps is many"',
                                   '_("{n} steps take long").format(n=steps)'),
        # where a local ``_`` hides the short name, ``gettext`` is the same translation
        "translated with gettext": GUARDED.replace('f"x must be >= 0, got {x}"',
                                                   'gettext("x must be >= 0, got {x}").format(x=x)'),
        "warning with gettext": GUARDED.replace('f"{steps} steps is many"',
                                                'gettext("{n} steps take long").format(n=steps)'),
        "importing gettext too": GUARDED.replace("    from utils.i18n import _\n",
                                                 "    from utils.i18n import _, gettext\n"),
        "assert": GUARDED.replace('"steps must be positive"', 'f"steps={steps} is not > 0"'),
        "without utils.i18n": GUARDED.replace("    from utils.i18n import _\n", ""),
    }
    for what, source in same.items():
        assert _fingerprint(_fake_utils(tmp_path / what, source, B)) == base, what
    changed = {
        "condition": GUARDED.replace("if x < 0:", "if x <= 0:"),
        "class": GUARDED.replace("raise ValueError", "raise TypeError"),
        "computation": GUARDED.replace("double(x) + 1", "double(x) + 2"),
        "warning's category": GUARDED.replace("UserWarning", "RuntimeWarning"),
        "assert's condition": GUARDED.replace("assert steps > 0", "assert steps > 1"),
        "statement before the raise": GUARDED.replace(
            "            raise", "            x = -x\n            raise"),
    }
    for what, source in changed.items():
        assert _fingerprint(_fake_utils(tmp_path / what, source, B)) != base, what


def test_an_exception_that_carries_data_still_counts(tmp_path):
    """Only message text is a placeholder: an exception argument that is a value still counts."""
    carries = A.replace("return double(x) + 1", "raise StopIteration(double(x))")
    base = _fingerprint(_fake_utils(tmp_path / "0", carries, B))
    other = carries.replace("StopIteration(double(x))", "StopIteration(double(x + 1))")
    assert _fingerprint(_fake_utils(tmp_path / "1", other, B)) != base
    # ``_(name)`` translates what a variable holds: the variable counts
    uses = A.replace("return double(x) + 1", "return _(x)")
    assert (_fingerprint(_fake_utils(tmp_path / "2", uses, B))
            != _fingerprint(_fake_utils(tmp_path / "3", uses.replace("_(x)", "_(y)"), B)))


def test_the_message_catalogue_is_not_model_code(tmp_path):
    """utils.i18n only picks a message's language: importing it adds no model code."""
    source = A.replace("from utils.b import double",
                       "from utils.b import double\n    from utils.i18n import _")
    utils_dir = _fake_utils(tmp_path, source, B)
    (utils_dir / "i18n").mkdir()
    (utils_dir / "i18n" / "__init__.py").write_text("def _(message):\n    return message\n")
    assert model_code_modules("utils.a", utils_dir) == ["utils.a", "utils.b"]
    base = _fingerprint(utils_dir)
    (utils_dir / "i18n" / "__init__.py").write_text("def _(message):\n    return message + '!'\n")
    assert _fingerprint(utils_dir) == base
    for start in ("utils.seq2seq", "utils.transformer", "utils.lm_training", "utils.induction"):
        assert not any(name.startswith("utils.i18n") for name in model_code_modules(start))
