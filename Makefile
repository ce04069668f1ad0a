# Attention, interactively — the two commands of the README:
#   make lab    set everything up (first time only) and open the course in JupyterLab
#   make test   set everything up (first time only) and run the whole test suite
# Both are idempotent: the virtual environment is rebuilt only when pyproject.toml changes.

# The interpreter that builds .venv: python3.11 (the version the tests run on) if it is on the
# PATH, else python3; `make PYTHON=/path/to/python3.x` picks another. pyproject.toml accepts
# 3.11 to 3.14 (the Pythons for which torch 2.13.0 and every pinned package have wheels).
PYTHON ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# d2l is a test oracle only: installed without its pins (see tests/d2l_oracle.py).
# Packages are installed --no-compile and byte-compiled by compileall instead, on every core,
# torch's while pip installs the rest: setup took 88-107 s instead of 120-148 s (3 runs each,
# alternating, on 2 cores). compileall, like pip, passes over the few files that are not
# Python 3 (hence `|| true`); a file still being written when the background pass read it is
# compiled again by the last pass, which recompiles every file whose size or time differs from
# its .pyc's.
SITE_PACKAGES = $(VENV)/lib/python*/site-packages
D2L_VERSION := 1.0.3
# What `make test` runs: unit, parity, drift, grading and browser tests, plus every lesson
# under strict nbval. Extra pytest arguments: make test ARGS="-k masking".
# -p tests.quick_imports: pytest skips an unused 2-4 s import (see tests/quick_imports.py).
NBVAL_FLAGS := -p tests.quick_imports --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
ARGS ?=
.PHONY: lab test test-training setup bench notebooks clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11-3.14 or run 'make PYTHON=/path/to/python3 ...'"; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; print("using $(PYTHON): Python %d.%d" % v + ("" if v == (3, 11) else " (accepted; the tests ran on 3.11)")); sys.exit(0 if (3, 11) <= v < (3, 15) else "error: the course needs Python 3.11 to 3.14 (torch 2.13.0 has no wheels for others); run make PYTHON=/path/to/python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile torch==2.13.0
	@echo "byte-compiling torch in the background while pip installs the rest"
	( $(BIN)/python -m compileall -qq $(SITE_PACKAGES) >/dev/null 2>&1 & compiling=$$!; \
	  $(BIN)/python -m pip install --quiet --no-compile -e ".[test,instructor]" \
	  && $(BIN)/python -m pip install --quiet --no-compile --no-deps d2l==$(D2L_VERSION); \
	  installed=$$?; wait $$compiling; exit $$installed )
	$(BIN)/python -m compileall -qq -j 0 $(SITE_PACKAGES) >/dev/null || true
	$(BIN)/python -m ipykernel install --user --name attention-course --display-name "Python 3 (attention course)"
	touch $(STAMP)

# Served from the repository root (lessons show figures from assets/), opened on chapters/.
# `make lab LANG=zh-CN`: JupyterLab in Chinese (the language pack), for the *.zh-CN.ipynb
# notebooks; any other LANG (a machine's own, e.g. en_US.UTF-8) opens it in English. Each
# language keeps its settings in .venv/lab-settings/<language> (no "Jupyter news?" prompt).
LAB_LANGUAGE := $(if $(filter zh-CN zh_CN,$(LANG)),zh-CN,en)
LAB_SETTINGS := $(VENV)/lab-settings/$(LAB_LANGUAGE)
lab: $(STAMP)
	$(BIN)/python -m utils.i18n.lab $(LAB_SETTINGS) $(LAB_LANGUAGE)
	LANG=$(if $(filter zh-CN,$(LAB_LANGUAGE)),C.UTF-8,$(LANG)) JUPYTERLAB_SETTINGS_DIR="$(CURDIR)/$(LAB_SETTINGS)" \
	    $(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/chapters $(LAB_ARGS)

# `make test` runs two lanes at once, one per core (GNU make and a POSIX shell, no extra tool):
# - lane 1: every unit, parity and browser test, the grading tests not named below, the
#   fresh-clone test, the Bahdanau training test (as the Transformer's: about 10 s) and the LMS
#   export tests, then the English lessons and exercises under strict nbval, on this machine's
#   own CPU kernels;
# - lane 2: the Chinese lessons and exercises under strict nbval on torch's generic CPU kernels,
#   so an output that holds only with this machine's SIMD kernels (AVX-512 here, AVX2 elsewhere)
#   fails here, not on a student's machine; then the tests that grade in the sandbox and check
#   what it leaves behind (hostile, resume, exercise, feedback, null-submission, workflow, fault
#   and Chinese-grading tests), one after another, the prediction-secrecy test (it reads the
#   graded class's release of every chapter) and the start-up test (lesson 1's release, made
#   in both lanes: here for the workflow, resume and fault tests, in lane 1 for the browser
#   tests; it moved for the lanes' balance), and the Transformer's training test (the shipped
#   models and 10 epochs trained here: about 25 s; `make test-training` trains them all).
# Each notebook runs once: a Chinese notebook's code is its English notebook's up to comments
# and strings and prints the same numbers (tests/test_i18n.py), so the English run covers this
# machine's kernels and the Chinese run the generic ones, for both languages.
# Both lanes run torch on one thread (OMP_NUM_THREADS=1), as the lessons and the grader do: two
# lanes with two threads each on two cores made every torch call wait for a busy core.
# The sandboxes of lane 1 run as other uids than lane 2's ($(LANE1_UIDS)): the two lanes never
# share a sandbox uid, its process limit or its processes, so grading tests may run in both.
# The split is by measured durations, so that the lanes end at about one time.
# Lane 2 writes to tests/artifacts/lane2.log, printed when both lanes are done; make test fails
# if either lane fails. Each lane ends with its slowest tests (--durations).
# With ARGS, only the selected tests run, in one lane.
ONE_THREAD := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
OTHER_CPU := ATEN_CPU_CAPABILITY=default $(ONE_THREAD)
LANE1_UIDS := ATTENTION_COURSE_SANDBOX_UID_BASE=61128
LANE2_TESTS := tests/test_grading_hostile.py tests/test_grading_resume.py \
               tests/test_exercises.py tests/test_feedback_diagnoses.py \
               tests/test_grading_workflow.py tests/test_null_submissions.py \
               tests/test_grading_faults.py tests/test_grading_chinese.py \
               tests/test_prediction_secrecy.py tests/test_grading_startup.py \
               tests/test_training_transformer.py
LANE2_LOG := tests/artifacts/lane2.log
CHINESE_NOTEBOOKS := $(wildcard chapters/*/lesson.zh-CN.ipynb chapters/*/exercises.zh-CN.ipynb)

# First, the course's own modules are byte-compiled once: a machine that sets
# PYTHONDONTWRITEBYTECODE (this project's machines do) would otherwise compile them again in each of the
# run's processes (kernels, sandboxes, grading commands; about 0.07 s of CPU for the imports of a
# lesson). A .pyc whose source has changed since is ignored by Python.
test: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 utils tests >/dev/null
ifeq ($(strip $(ARGS)),)
	@mkdir -p tests/artifacts
	@echo "== lane 2 in the background (log: $(LANE2_LOG)): Chinese notebooks on generic kernels; grader tests =="
	@( $(OTHER_CPU) $(BIN)/python -m pytest $(CHINESE_NOTEBOOKS) $(NBVAL_FLAGS) -p no:cacheprovider; \
	   first=$$?; $(ONE_THREAD) $(BIN)/python -m pytest -p tests.quick_imports $(LANE2_TESTS) -p no:cacheprovider --durations=15; \
	   second=$$?; [ $$first -eq 0 ] && [ $$second -eq 0 ] ) > $(LANE2_LOG) 2>&1 & lane2=$$!; \
	trap 'pkill -P $$lane2; kill $$lane2 2>/dev/null; exit 130' INT TERM; \
	echo "== lane 1: every other test, then the English lessons and exercises under strict nbval =="; \
	$(LANE1_UIDS) $(ONE_THREAD) $(BIN)/python -m pytest tests chapters/*/lesson.ipynb chapters/*/exercises.ipynb $(NBVAL_FLAGS) \
	    $(foreach t,$(LANE2_TESTS),--ignore=$(t)) --durations=30; lane1=$$?; \
	wait $$lane2; lane2=$$?; \
	echo "== lane 2 output =="; cat $(LANE2_LOG); \
	echo "== exit status: lane 1 $$lane1, lane 2 $$lane2 =="; \
	[ $$lane1 -eq 0 ] && [ $$lane2 -eq 0 ]
else
	$(BIN)/python -m pytest tests chapters/*/lesson.ipynb chapters/*/exercises.ipynb $(CHINESE_NOTEBOOKS) $(NBVAL_FLAGS) $(ARGS)
endif

# The training tests with every model trained here from scratch, all its epochs (about six
# minutes on two idle cores), instead of `make test`'s shipped models and first ten epochs
# (tests/shipped_training.py): run it after `python -m utils.shipped_models` has made new models.
test-training: $(STAMP)
	ATTENTION_COURSE_FULL_TRAINING=1 $(ONE_THREAD) $(BIN)/python -m pytest -p tests.quick_imports \
	    tests/test_training_bahdanau.py tests/test_training_transformer.py -p no:cacheprovider --durations=5

# The benchmarks of the README's "Performance" table (scripts that print figures, not tests).
bench: $(STAMP)
	$(BIN)/python -m tests.benchmarks.run_all

# Maintainers: re-execute the lessons in place and strip widget state / execution noise.
notebooks: $(STAMP)
	$(BIN)/python -m utils.notebook_tools execute chapters/*/lesson.ipynb

clean:
	rm -rf $(VENV) tests/artifacts .pytest_cache
