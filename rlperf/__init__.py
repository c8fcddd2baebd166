"""rlperf: declarative performance measurement of RL training and inference.

Import cost matters (``rlperf --help`` must be fast), so this package imports
nothing heavy at module level; Ray, torch and TensorFlow are imported by the
stages that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"
