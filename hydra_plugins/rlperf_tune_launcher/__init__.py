"""rlperf's Hydra launcher: every cell of a multirun runs as a Ray Tune trial.

Packaged the way Hydra packages its own launchers: ``hydra_plugins`` is a
namespace package (no ``__init__.py`` of its own), :mod:`.config` registers the
options in group ``hydra/launcher`` under the name ``rlperf_tune``,
:mod:`.launcher` is the thin :class:`~hydra.plugins.launcher.Launcher`, and
``_impl`` hands its Hydra objects to the sweep engine (:mod:`rlperf.sweep.launch`:
Ray, Tune, RLlib imports), imported inside ``launch()`` so that plugin discovery
and config composition stay fast. See docs/sweeps.md.
"""

__version__ = "0.1.0"
