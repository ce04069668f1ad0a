"""JupyterLab settings for ``make lab``: the interface language, and no news prompt.

    python -m utils.i18n.lab SETTINGS_DIR LANGUAGE

writes, under SETTINGS_DIR (the Makefile passes one per language inside .venv, used as
``JUPYTERLAB_SETTINGS_DIR``), the interface language (zh-CN needs the language pack
``jupyterlab-language-pack-zh-CN``) and ``fetchNews: "false"``, so JupyterLab does not open by
asking "Would you like to get notified about official Jupyter news?".
"""

from __future__ import annotations

import json
import pathlib
import sys

LOCALES = {"en": "en", "zh-CN": "zh_CN"}


def write_settings(folder: pathlib.Path, language: str) -> list[pathlib.Path]:
    if language not in LOCALES:
        raise SystemExit(f"language {language!r} is not one the course speaks; "
                         f"use one of {', '.join(LOCALES)}")
    files = {
        "@jupyterlab/translation-extension/plugin.jupyterlab-settings":
            {"locale": LOCALES[language]},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
    }
    written = []
    for name, settings in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m utils.i18n.lab SETTINGS_DIR LANGUAGE")
    write_settings(pathlib.Path(sys.argv[1]), sys.argv[2])
