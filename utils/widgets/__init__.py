"""Interactive explorers, one module per lesson: thin ipywidgets views over pure functions.

Each explorer builds its controls and figure once and, on every change, recomputes with a pure
function from ``utils`` and updates the matplotlib artists in place. Tests drive them headless
by setting ``explorer.controls[name].value`` and reading ``explorer.state``.
"""
