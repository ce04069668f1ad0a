"""Translators' and maintainers' commands (English is the source; zh-CN the only other language).

    python -m utils.i18n update  [NOTEBOOK ...]   catalogs in line with the English (fuzzy on change)
    python -m utils.i18n check   [NOTEBOOK ...]   what is untranslated, fuzzy or inconsistent
    python -m utils.i18n build   [NOTEBOOK ...]   write lesson.zh-CN.ipynb / exercises.zh-CN.ipynb
    python -m utils.i18n build --execute [...]    ... and run them (committed executed)

Without NOTEBOOK: every chapters/*/lesson.ipynb and exercises.ipynb, and (update, check)
utils' own messages (utils/locale/zh-CN/utils.po).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from utils.i18n.catalogs import CHINESE, problems, update

REPO = pathlib.Path(__file__).resolve().parents[2]


def english_notebooks() -> list[pathlib.Path]:
    chapters = REPO / "chapters"
    return sorted(list(chapters.glob("*/lesson.ipynb")) + list(chapters.glob("*/exercises.ipynb")))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.i18n",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["update", "check", "build"])
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--language", default=CHINESE, choices=[CHINESE])
    parser.add_argument("--execute", action="store_true", help="build: also run the notebooks")
    args = parser.parse_intermixed_args(argv)   # options before or after the notebooks
    notebooks = args.notebooks or english_notebooks()
    for notebook in notebooks:
        if not notebook.is_file() or notebook.suffixes != [".ipynb"]:
            parser.error(f"{notebook}: not an English notebook (chapters/NN_*/lesson.ipynb "
                         "or exercises.ipynb)")
    status = 0
    if args.command in ("update", "check") and not args.notebooks:
        from utils.i18n import messages
        if args.command == "update":
            path, counts = messages.update(args.language)
            print(f"{path}: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
        else:
            for problem in messages.problems(args.language):
                print(problem)
                status = 1
    for notebook in notebooks:
        if args.command == "update":
            path, counts = update(notebook, args.language)
            print(f"{path}: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
        elif args.command == "check":
            found = problems(notebook, args.language)
            for problem in found:
                print(problem)
            status |= bool(found)
        else:
            found = problems(notebook, args.language)
            if found:
                print(f"{notebook}: not built, {len(found)} problem(s); "
                      f"run python -m utils.i18n check {notebook}")
                status = 1
                continue
            from utils.i18n.build import write
            print(f"built {write(notebook, args.language, execute=args.execute)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
