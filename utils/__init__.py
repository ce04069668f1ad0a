"""Attention, interactively: the course's shared library.

One module per concept (``masking``, ``plotting``, ``data``, ...). Importing this package is
light on purpose: it loads no data, trains nothing and touches no network. Import the module
you need, e.g. ``from utils.masking import masked_softmax``.
"""

__version__ = "0.1.0"
