"""The course's hand-aligned English–French gold set: read ``assets/alignment/gold.txt``.

Each pair has English and French tokens (preprocessed as ``utils.data.preprocess`` does) and
word links in the convention of Och & Ney (2003): *sure* links (the translation needs them) and
*possible* links (acceptable, ambiguous), every sure link also being possible. Links are stored
0-based as ``(english_index, french_index)``. The file format and the linking conventions are
described in ``assets/alignment/README.md``; ``utils.alignment`` scores attention maps with it.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

from utils.data import preprocess, tokenize
from utils.i18n import _

GOLD_FILE = pathlib.Path(__file__).resolve().parents[1] / "assets" / "alignment" / "gold.txt"

FIELDS = ("id", "tags", "en", "fr", "sure", "possible")
REQUIRED = ("id", "en", "fr")

# The phenomena a pair may be tagged with.
TAGS = {
    "adjective-after-noun": "the French adjective follows its noun (une voiture rouge)",
    "negation": "ne ... pas around the verb, both linked to the English negation",
    "elision": "a French token with an apostrophe (j'ai, c'est, qu'il, l'argent)",
    "one-to-many": "one English word, two French words (angry = en colère)",
    "many-to-one": "two English words, one French word (a lot = beaucoup)",
    "unlinked-article": "a French article with no English word (j'aime le café)",
    "est-ce-que": "a question with est-ce que",
    "monotone": "the sure links keep the word order",
    "possessive": "a possessive (my, his, tom's)",
    "pronoun-reordering": "an object pronoun before the verb (je le vois = i see him)",
    "adverb-placement": "an adverb that moves (sait très bien nager = can swim very well)",
}


def tag_name(tag: str) -> str:
    """A tag as a table shows it: in English the tag itself (the data file and the lessons name
    it so); in another language its translation, with the tag beside it."""
    names = {"adjective-after-noun": _("adjective-after-noun"), "negation": _("negation"),
             "elision": _("elision"), "one-to-many": _("one-to-many"),
             "many-to-one": _("many-to-one"), "unlinked-article": _("unlinked-article"),
             "est-ce-que": _("est-ce-que"), "monotone": _("monotone"),
             "possessive": _("possessive"), "pronoun-reordering": _("pronoun-reordering"),
             "adverb-placement": _("adverb-placement")}
    return names.get(tag, tag)


_LINK = re.compile(r"(\d+)-(\d+)")


@dataclasses.dataclass(frozen=True)
class GoldPair:
    """One hand-aligned pair; links are 0-based (english_index, french_index), possible ⊇ sure."""

    id: int
    tags: tuple[str, ...]
    english: tuple[str, ...]
    french: tuple[str, ...]
    sure: frozenset[tuple[int, int]]
    possible: frozenset[tuple[int, int]]

    @property
    def linked_french(self) -> frozenset[int]:
        """French positions with at least one (possible) link."""
        return frozenset(f for _, f in self.possible)


def _fail(source, line_no: int, problem: str):
    raise ValueError(_("{source}, line {line_no}: {problem}").format(
        source=source, line_no=line_no, problem=problem))


def _sentence(source, line_no: int, side: str, text: str) -> tuple[str, ...]:
    tokens = tokenize(text)
    if not tokens:
        _fail(source, line_no, _("the {side} sentence is empty; write its tokens after "
                                 "'{side}:'").format(side=side))
    if preprocess(text) != text or " ".join(tokens) != text:
        _fail(source, line_no, _("the {side} sentence {text!r} is not preprocessed; write it as "
                                 "{preprocessed!r}").format(
            side=side, text=text, preprocessed=' '.join(tokenize(preprocess(text)))))
    return tuple(tokens)


def _links(source, line_no: int, field: str, text: str, n_english: int,
           n_french: int) -> set[tuple[int, int]]:
    links: set[tuple[int, int]] = set()
    for item in text.split():
        match = _LINK.fullmatch(item)
        if not match:
            _fail(source, line_no, _("{field} link {item!r} is not english_position-"
                                     "french_position (e.g. 2-3)").format(field=field, item=item))
        e, f = int(match[1]), int(match[2])
        if not 1 <= e <= n_english:
            _fail(source, line_no, _("{field} link {item}: English position {e} is out of range "
                                     "(the English sentence has {n_english} tokens, "
                                     "1..{n_english})").format(field=field, item=item, e=e,
                                                               n_english=n_english))
        if not 1 <= f <= n_french:
            _fail(source, line_no, _("{field} link {item}: French position {f} is out of range "
                                     "(the French sentence has {n_french} tokens, "
                                     "1..{n_french})").format(field=field, item=item, f=f,
                                                              n_french=n_french))
        if (e - 1, f - 1) in links:
            _fail(source, line_no, _("{field} link {item} is listed twice; keep one").format(
                field=field, item=item))
        links.add((e - 1, f - 1))
    return links


def _pair(source, fields: dict, start: int, seen_ids: dict) -> GoldPair:
    """A GoldPair from one block's ``fields`` {name: (line number, value)}."""
    for name in REQUIRED:
        if name not in fields:
            _fail(source, start, _("the pair starting here has no '{name}:' line; every pair "
                                   "needs {required}").format(name=name,
                                                              required=', '.join(REQUIRED)))
    id_line, id_text = fields["id"]
    if not re.fullmatch(r"[0-9]+", id_text) or int(id_text) < 1:
        _fail(source, id_line, _("id {id_text!r} is not a positive integer").format(
            id_text=id_text))
    pair_id = int(id_text)
    if pair_id in seen_ids:
        _fail(source, id_line, _("duplicate id {pair_id} (already used on line {first_line}); "
                                 "give each pair its own id").format(
            pair_id=pair_id, first_line=seen_ids[pair_id]))
    seen_ids[pair_id] = id_line
    tags_line, tags_text = fields.get("tags", (start, ""))
    tags = tuple(tags_text.split())
    for tag in tags:
        if tag not in TAGS:
            _fail(source, tags_line, _("unknown tag {tag!r}; use one of {tags}").format(
                tag=tag, tags=', '.join(TAGS)))
    english = _sentence(source, fields["en"][0], "en", fields["en"][1])
    french = _sentence(source, fields["fr"][0], "fr", fields["fr"][1])
    sure_line, sure_text = fields.get("sure", (start, ""))
    sure = _links(source, sure_line, "sure", sure_text, len(english), len(french))
    possible_line, possible_text = fields.get("possible", (start, ""))
    possible = _links(source, possible_line, "possible", possible_text, len(english),
                      len(french))
    both = sorted(sure & possible)
    if both:
        e, f = both[0]
        _fail(source, possible_line, _("link {e}-{f} is both sure and possible; list it under "
                                       "'sure:' only (sure links are possible too)").format(
            e=e + 1, f=f + 1))
    return GoldPair(pair_id, tags, english, french, frozenset(sure), frozenset(sure | possible))


def parse_gold(text: str, source="<string>") -> list[GoldPair]:
    """The pairs of a gold file's ``text``; ``source`` names it in error messages."""
    pairs: list[GoldPair] = []
    seen_ids: dict[int, int] = {}
    fields: dict[str, tuple[int, str]] = {}
    start = 0
    for line_no, line in enumerate(text.splitlines() + [""], start=1):   # "" ends the last block
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        if not stripped:
            if fields:
                pairs.append(_pair(source, fields, start, seen_ids))
                fields = {}
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon:
            _fail(source, line_no, _("expected 'field: value', got {line!r}").format(
                line=line[:60]))
        if name not in FIELDS:
            _fail(source, line_no, _("unknown field {name!r}; use one of {fields}").format(
                name=name, fields=', '.join(FIELDS)))
        if name in fields:
            _fail(source, line_no, _("field '{name}' appears twice in one pair (first on line "
                                     "{first_line}); separate pairs with a blank line").format(
                name=name, first_line=fields[name][0]))
        if not fields:
            start = line_no
        fields[name] = (line_no, value.strip())
    return pairs


_LOADED: dict = {}


def load_gold(path=None) -> list[GoldPair]:
    """The pairs of ``path`` (default ``GOLD_FILE``); read again only when the file changes."""
    file = pathlib.Path(GOLD_FILE if path is None else path)
    if not file.is_file():
        raise FileNotFoundError(_("gold alignment file not found: {file}; pass the path of a "
                                  "gold.txt (default {gold_file})").format(file=file,
                                                                            gold_file=GOLD_FILE))
    stat = file.stat()
    key = (str(file.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _LOADED:
        _LOADED[key] = tuple(parse_gold(file.read_text(encoding="utf-8-sig"), source=file))
    return list(_LOADED[key])
