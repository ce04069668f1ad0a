"""Fixtures for real-browser tests: a local JupyterLab and Debian's headless Chromium.

- ``jupyter_lab`` (session): JupyterLab from this Python environment on 127.0.0.1, no token,
  root = the repository, settings, workspaces and checkpoints in a temporary folder (never in the repo),
  autosave off (running a lesson must not rewrite it), no news/update/extension-manager fetches.
- ``browser_page`` (per test): a fresh page in a session-wide Chromium; every request that
  would leave the machine is blocked and reported in ``console_errors``.
- ``lab_page`` (per test): the session's one page for ``jupyter_lab``, blocked and reported the
  same way. JupyterLab loads in it once; ``open_notebook`` then opens each test's notebook in
  place (the notebooks before closed unsaved, their kernels shut down), which saves the 5-6 s a
  fresh page spends loading JupyterLab. What the page reports between two tests counts as the
  next test's error; after a failed test the page is reloaded.
- ``console_errors`` (per test): the page's console errors and uncaught exceptions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil
import pytest

from tests.browser.helpers import (CHROMIUM, CHROMIUM_ARGS, CHROMIUM_MISSING, DEFAULT_TIMEOUT_MS,
                                   ConsoleErrors, save_screenshot)
from tests.conftest import ARTIFACTS, REPO

STARTUP_TIMEOUT_S = 90
STOP_TIMEOUT_S = 10
# Local URLs only: the loopback address JupyterLab listens on, and in-page data/blob URLs.
OFF_MACHINE_URL = re.compile(r"^(?!https?://127\.0\.0\.1[:/]|data:|blob:)")

# JupyterLab user settings for the tests (see the module docstring for why each one).
LAB_USER_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # Every cell attached to the DOM, so offscreen widgets exist and can be found and driven.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}
# `python -m jupyterlab` after utils.grading.skip_unused_schema_formats() (the grader's and
# tests/quick_imports.py's way): jsonschema then skips its "iri" format check, which no Jupyter
# server schema uses, and the server starts without the 2.3 s of CPU that package spends at import.
LAB_MAIN = ("import sys; from utils.grading import skip_unused_schema_formats; "
            "skip_unused_schema_formats(); from jupyterlab.labapp import main; sys.exit(main())")
# The plugin that asks "Would you like to receive official Jupyter news?" in a toast.
LAB_PAGE_CONFIG = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}


@dataclasses.dataclass
class JupyterLabServer:
    """A running JupyterLab: open ``base_url + '/lab/tree/<path from repo root>'``."""

    base_url: str
    root_dir: pathlib.Path
    log_path: pathlib.Path
    process: subprocess.Popen
    user_settings_dir: pathlib.Path

    @property
    def pid(self) -> int:
        return self.process.pid


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _http_get(url: str, timeout: float = 2.0) -> bytes:
    """A GET that ignores any proxy settings (everything here is on 127.0.0.1)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return response.read()


def _write_lab_config(state_dir: pathlib.Path, settings: dict | None = None
                      ) -> dict[str, pathlib.Path]:
    """Write config and user settings under ``state_dir``; return the folders the server uses."""
    dirs = {name: state_dir / name
            for name in ("config", "runtime", "workspaces", "user-settings", "checkpoints")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    (dirs["config"] / "labconfig").mkdir(exist_ok=True)
    (dirs["config"] / "labconfig" / "page_config.json").write_text(json.dumps(LAB_PAGE_CONFIG))
    _write_user_settings(dirs["user-settings"], {**LAB_USER_SETTINGS, **(settings or {})})
    return dirs


def _write_user_settings(settings_dir: pathlib.Path, settings: dict) -> None:
    for relpath, values in settings.items():
        path = settings_dir / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@contextlib.contextmanager
def lab_user_settings(server: JupyterLabServer, settings: dict):
    """Give a running JupyterLab these user settings (by settings file) until the block ends,
    then restore the files as they were. The server reads them at each request: pages loaded
    inside the block see them, pages loaded before keep what they loaded."""
    previous = {relpath: (server.user_settings_dir / relpath).read_text()
                if (server.user_settings_dir / relpath).exists() else None for relpath in settings}
    try:
        _write_user_settings(server.user_settings_dir, settings)
        yield server
    finally:
        for relpath, text in previous.items():
            path = server.user_settings_dir / relpath
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text)


def _log_tail(path: pathlib.Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def start_jupyter_lab(root_dir: pathlib.Path, state_dir: pathlib.Path,
                      log_path: pathlib.Path, settings: dict | None = None) -> JupyterLabServer:
    """Start JupyterLab on a free loopback port and wait until ``/api/status`` answers
    (``settings``: user settings besides LAB_USER_SETTINGS, by settings file)."""
    dirs = _write_lab_config(state_dir, settings)
    port = _free_port()
    command = [
        sys.executable, "-c", LAB_MAIN, "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=",
        f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.terminals_enabled=False",
        # Opening a notebook writes a checkpoint: keep those out of the repository too.
        f"--FileCheckpoints.root_dir={dirs['checkpoints']}",
        f"--LabApp.workspaces_dir={dirs['workspaces']}",
        f"--LabApp.user_settings_dir={dirs['user-settings']}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        # window.jupyterapp, so helpers can tell when a kernel is really connected and idle.
        "--LabApp.expose_app_in_browser=True",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(dirs["config"]),
               JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), PYTHONUNBUFFERED="1")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=root_dir, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    server = JupyterLabServer(f"http://127.0.0.1:{port}", root_dir, log_path, process,
                              dirs["user-settings"])
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {process.returncode} while starting; "
                               f"log {log_path}:\n{_log_tail(log_path)}")
        try:
            _http_get(f"{server.base_url}/api/status")
            return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    stop_jupyter_lab(server)
    raise RuntimeError(f"JupyterLab did not answer /api/status within {STARTUP_TIMEOUT_S} s; "
                       f"log {log_path}:\n{_log_tail(log_path)}")


def stop_jupyter_lab(server: JupyterLabServer) -> None:
    """Terminate the server by PID (kill after a timeout), then kill any kernel it left behind."""
    try:
        children = psutil.Process(server.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    server.process.terminate()  # SIGTERM: the server shuts its kernels down, then exits
    try:
        server.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=STOP_TIMEOUT_S)
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


@pytest.fixture(scope="session")
def jupyter_lab(tmp_path_factory) -> JupyterLabServer:
    """A JupyterLab serving the repository (log: tests/artifacts/jupyter_lab.log)."""
    server = start_jupyter_lab(REPO, tmp_path_factory.mktemp("jupyter_lab"), ARTIFACTS / "jupyter_lab.log")
    yield server
    stop_jupyter_lab(server)


@pytest.fixture(scope="session")
def chromium_browser():
    """Debian's headless Chromium driven by Playwright; fails (not skips) when it is missing."""
    if not CHROMIUM.exists():
        pytest.fail(CHROMIUM_MISSING)
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=CHROMIUM_ARGS)
    except Exception as error:
        playwright.stop()
        pytest.fail(f"could not launch {CHROMIUM}: {error}")
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture
def console_errors() -> ConsoleErrors:
    """Errors of this test's ``browser_page``; call ``console_errors.assert_none()`` at the end."""
    return ConsoleErrors()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item, so fixtures can see whether the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def browser_page(request, chromium_browser, console_errors):
    """A fresh 1280x900 page; on failure a screenshot goes to tests/artifacts/<test>/failure.png."""
    context = chromium_browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)

    def block(route):
        console_errors.record_blocked_request(route.request.url)
        route.abort()

    context.route(OFF_MACHINE_URL, block)
    page = context.new_page()
    console_errors.attach(page)
    yield page
    _screenshot_if_failed(request, page)
    context.close()


def _screenshot_if_failed(request, page) -> bool:
    """If the test failed, save the page as tests/artifacts/<test>/failure.png; return whether
    it failed."""
    report = getattr(request.node, "report_call", None)
    if report is None or not report.failed:
        return False
    name = re.sub(r"[^\w.-]", "_", request.node.name)
    try:
        save_screenshot(page, ARTIFACTS / name, "failure")
    except Exception:  # a crashed page has nothing to show; the test's own error says why
        pass
    return True


class _ErrorRelay:
    """The shared page's listeners: they report to the running test's ``ConsoleErrors``, and
    between tests to a holding one whose messages go to the next test."""

    def __init__(self, page) -> None:
        self.holding = ConsoleErrors()
        self.target = self.holding
        page.on("console", lambda message: self.target.record_console_message(message))
        page.on("pageerror", lambda error: self.target.record_page_error(error))

    def start(self, console_errors: ConsoleErrors) -> None:
        console_errors.messages.extend(f"(between tests) {text}" for text in self.holding.messages)
        self.holding.messages.clear()
        self.target = console_errors

    def stop(self) -> None:
        self.target = self.holding


@pytest.fixture(scope="session")
def _shared_lab_page(chromium_browser):
    """The session's page for ``lab_page`` and its error relay (one browser context)."""
    context = chromium_browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    state = {}

    def block(route):
        state["relay"].target.record_blocked_request(route.request.url)
        route.abort()

    context.route(OFF_MACHINE_URL, block)

    def new_page():
        state["page"] = context.new_page()
        state["relay"] = _ErrorRelay(state["page"])

    new_page()
    state["new_page"] = new_page
    yield state
    context.close()


@pytest.fixture
def lab_page(request, _shared_lab_page, console_errors):
    """The session's JupyterLab page (see the module docstring); on failure a screenshot goes to
    tests/artifacts/<test>/failure.png and the next test gets a new page."""
    state = _shared_lab_page
    if state["page"].is_closed():
        state["new_page"]()
    state["relay"].start(console_errors)
    yield state["page"]
    state["relay"].stop()
    if _screenshot_if_failed(request, state["page"]):
        state["page"].close()   # whatever state the failure left, the next test starts afresh
