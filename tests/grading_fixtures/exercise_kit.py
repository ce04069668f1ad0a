"""The records a chapter's exercise fixtures are written in (see ``mistakes.py``).

``Mistake``: a typical wrong answer. It rewrites one solution cell of the instructor notebook
(plain text replacements in the instructor's own solution) so that it makes exactly that
mistake, names the test cell that must catch it, the words its feedback must show, and the
points that test cell still gives (partial credit: the checks the mistake does not break).

``Alternative``: a second correct answer to one exercise, written independently of the
instructor's (a loop against a vectorised form, ``einsum`` against ``bmm``, ``where`` against
``masked_fill``...). It replaces the whole solution cell and must earn full marks.
"""

from typing import NamedTuple


class Mistake(NamedTuple):
    name: str            # student id of the submission, unique across chapters
    solution: str        # grade_id of the solution cell rewritten
    test: str            # grade_id of the test cell that must catch it (all others pass)
    edits: tuple         # (old, new) text replacements in the instructor's solution
    diagnosis: str       # words the feedback must show
    # Test cells of later exercises whose answers call the rewritten function: they fail too
    # (a wrong scaled_scores makes attention_weights wrong), as they would for a real student.
    downstream: tuple = ()
    downstream_says: tuple = ()   # words the feedback of those later cells must show
    earns: float = 0.0   # points the test cell still gives (its checks the mistake passes)


def M(name, solution, test, edits, diagnosis, downstream=(), downstream_says=(), earns=0.0):
    return Mistake(name, solution, test, tuple(edits), diagnosis, tuple(downstream),
                   tuple(downstream_says), float(earns))


class Alternative(NamedTuple):
    solution: str        # grade_id of the solution cell replaced
    source: str          # the whole cell: a correct answer written another way


def A(solution, source):
    return Alternative(solution, source)
