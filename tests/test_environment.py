"""environment.yml (conda/Binder) and pyproject.toml must name the same pinned dependencies."""

import re
import tomllib

import yaml

from conftest import REPO


def _name(requirement: str) -> str:
    return re.split(r"[=<>!~\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return {_name(r): r.replace(" ", "") for r in reqs}


def _environment_requirements() -> dict[str, str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_lists) == 1, "environment.yml must have exactly one 'pip:' list"
    reqs = [r for r in pip_lists[0] if not r.startswith("-e")]
    return {_name(r): r.replace(" ", "") for r in reqs}


def test_environment_yml_matches_pyproject():
    pyproject, environment = _pyproject_requirements(), _environment_requirements()
    missing = sorted(set(pyproject) - set(environment))
    extra = sorted(set(environment) - set(pyproject))
    assert not missing, f"in pyproject.toml but not environment.yml: {missing}"
    assert not extra, f"in environment.yml but not pyproject.toml: {extra}"
    differ = {n: (pyproject[n], environment[n]) for n in pyproject if pyproject[n] != environment[n]}
    assert not differ, f"pins differ (pyproject, environment.yml): {differ}"


def test_every_dependency_is_pinned_exactly():
    loose = [r for r in _pyproject_requirements().values() if "==" not in r]
    assert not loose, f"pin these exactly in pyproject.toml and environment.yml: {loose}"


def test_environment_installs_the_course_package_and_python_311():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip_list = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip_list, "environment.yml must install the course package (utils) with '-e .'"
    assert pip_list[0] == "torch==2.13.0", "torch must come first so pip picks the CPU build"
