"""Non-vacuous fidelity, return impact and compressed variants of a policy that behaves.

Unit checks of the measures (rlperf/edge/fidelity.py, rlperf/tflite/tflite_model.py), and
the edge stage on CartPole MLP policies (``cartpole_policy_run``: plays to the cap of 500;
a near-constant twin of it). docs/compression.md. How the compressed variants are built
(pruning, the fine-tune guard, their file names) is in tests/tflite/test_compress.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlperf.edge.fidelity import (
    NEAR_CONSTANT_SHARE,
    flag_return_loss,
    logit_fidelity,
    reference_informativeness,
    return_parity,
    verdict,
)


def test_near_constant_reference_is_vacuous() -> None:
    logits = np.zeros((100, 4))
    logits[:, 2] = 1.0
    logits[:3, 0] = 2.0  # 97 % of frames pick action 2
    info = reference_informativeness(logits, [500.0] * 3, [20.0, 25.0, 18.0])
    assert info["top_action_share"] == pytest.approx(0.97) and NEAR_CONSTANT_SHARE <= 0.97
    assert info["vacuous"] and "near-constant" in info["vacuous_reason"]
    assert info["action_entropy_bits"] == pytest.approx(
        -(0.97 * np.log2(0.97) + 0.03 * np.log2(0.03))
    )


def test_reference_no_better_than_random_is_vacuous() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200, 6))  # every action used
    info = reference_informativeness(logits, [-21.0, -21.0, -20.0], [-21.0, -20.0, -21.0])
    assert info["top_action_share"] < 0.3 and info["vacuous"]
    assert "not above a random policy" in info["vacuous_reason"]
    better = reference_informativeness(logits, [500.0, 480.0, 500.0], [20.0, 31.0, 12.0])
    assert not better["vacuous"] and better["vs_random_low"] > 400


def test_decisive_agreement_counts_frames_with_a_margin_beyond_the_error() -> None:
    ref = np.array([[0.0, 1.0], [0.0, 0.05], [2.0, 0.0], [0.0, 0.01]])
    var = ref + np.array([[0.1, -0.1], [0.1, 0.0], [0.0, 0.1], [0.02, 0.0]])
    fid = logit_fidelity(var, ref, 0.9)
    # max error 0.1: frames 0 and 2 (margins 1 and 2) are decisive; 1 and 3 flip.
    assert fid["decisive_frames"] == 2 and fid["decisive_agreement"] == 1.0
    assert fid["agreement"] == 0.5 and fid["flagged"]


def test_return_parity_interval_tie_and_saturation() -> None:
    tie = return_parity([10.0, 12.0, 9.0], [11.0, 11.0, 10.0])
    assert tie["return_tie"] and tie["return_diff_low"] < 0 < tie["return_diff_high"]
    worse = return_parity([100.0, 120.0, 110.0], [500.0, 490.0, 500.0])
    assert not worse["return_tie"] and worse["return_diff_high"] < 0
    # Agreement alone passed it; playing worse on the same seeds flags it, with the figures.
    fid = {"flagged": False, **worse}
    flag_return_loss(fid)
    assert fid["flagged"] and verdict(fid) == "flagged"
    assert fid["flag_reason"].startswith("plays worse than the reference: return -387 [")
    fid = {"flagged": False, **tie}
    flag_return_loss(fid)
    assert not fid["flagged"] and verdict(fid) == "passed"
    capped = return_parity([500.0] * 3, [500.0] * 3, [True] * 3)
    assert capped["saturates"] and capped["return_tie"] and capped["return_diff_low"] == 0
    assert not return_parity([500.0] * 3, [500.0] * 3, [True, False, True])["saturates"]


def test_a_box_policys_return_loss_must_matter_to_flag() -> None:
    """A continuous actor's returns move with its actions: a consistent loss of a few
    hundredths (the dynamic variant on Pendulum: -0.03 of -142.8) is significant over
    paired episodes but no loss; it flags past 1 % of the reference's gain over random."""
    from rlperf.edge.fidelity import return_loss_margin

    reference = {"vs_random_diff": 1103.0}
    assert return_loss_margin(reference, continuous=False) == 0.0
    margin = return_loss_margin(reference, continuous=True)
    assert margin == pytest.approx(11.03)
    tiny = return_parity([-142.83, -1.03, -117.04], [-142.80, -1.00, -117.00])
    assert tiny["return_diff_high"] < 0  # significant, tiny
    fid = {"flagged": False, **tiny}
    flag_return_loss(fid, margin)
    assert not fid["flagged"] and fid["return_loss_margin"] == margin
    big = return_parity([-170.0, -30.0, -140.0], [-142.8, -1.0, -117.0])
    fid = {"flagged": False, **big}
    flag_return_loss(fid, margin)
    assert fid["flagged"] and fid["flag_reason"].startswith("plays worse than the reference")
    assert return_loss_margin({"vs_random_diff": -5.0}, continuous=True) == 0.0


def _edge(cfg: Any, out_dir: Path) -> dict[str, Any]:
    from rlperf.edge.edge_job import run_edge
    from rlperf.job_wrapper import JobContext

    return run_edge(cfg, out_dir, JobContext.for_job(cfg, out_dir)).data


def _overrides(
    run: Path, cache: Path, backend: str, *extra: str, episodes: int = 3, size: int = 200
) -> list[str]:
    return [
        "stage=edge",
        f"run={run}",
        f"backend={backend}",
        f"edge.cache_dir={cache}",
        f"edge.episodes={episodes}",
        "edge.warmup_steps=10",
        f"edge.calibration_size={size}",
        f"edge.fidelity_observations={size}",
        *extra,
    ]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One artifact cache for the CartPole policy's cells (fidelity and calibration sets)."""
    return tmp_path_factory.mktemp("cache")


@pytest.mark.slow
def test_trained_cartpole_int8_passes_for_real(
    cartpole_policy_run, compose_cfg, cache, tmp_path_factory
) -> None:
    cfg = compose_cfg(*_overrides(cartpole_policy_run["path"], cache, "tflite_int8"))
    s = _edge(cfg, tmp_path_factory.mktemp("int8"))
    fid = s["fidelity"]
    ref = fid["reference"]
    assert not ref["vacuous"] and ref["top_action_share"] < 0.8
    assert ref["random_returns"] is not None and max(ref["random_returns"]) < 100
    assert fid["verdict"] == "passed" and fid["agreement"] >= 0.95
    # A flip on a decisive frame needs errors of opposite sign on its two best logits.
    assert fid["decisive_frames"] >= 150 and fid["decisive_agreement"] >= 0.99
    assert fid["reference_returns"] == [500.0] * 3
    assert fid["return_tie"] and fid["saturates"]
    assert 0 < s["model_gzip_bytes"] < s["model_size_bytes"]
    assert s["weights"]["weights"] == 4 * 64 + 64 * 64 + 64 * 2
    assert s["weights"]["sparsity"] < 0.05  # a dense policy


@pytest.mark.slow
def test_near_constant_reference_makes_the_stage_report_vacuous(
    compose_cfg, tmp_path_factory
) -> None:
    from support.edge_kit import make_cartpole_run

    path = tmp_path_factory.mktemp("runs") / "constant"
    run = make_cartpole_run(path, steps=50, constant_action=0)
    cfg = compose_cfg(
        *_overrides(run["path"], tmp_path_factory.mktemp("cache"), "tflite_fp32", size=100)
    )
    s = _edge(cfg, tmp_path_factory.mktemp("out"))
    fid = s["fidelity"]
    # Agreement is perfect, yet it shows nothing: the verdict says so.
    assert fid["agreement"] == 1.0 and not fid["flagged"]
    assert fid["verdict"] == "vacuous" and fid["reference"]["top_action_share"] == 1.0
    assert "near-constant" in fid["reference"]["vacuous_reason"]
    assert "not above a random policy" in fid["reference"]["vacuous_reason"]


@pytest.mark.slow
def test_qat_and_pruned_variants_keep_the_return(
    cartpole_policy_run, compose_cfg, cache, tmp_path_factory
) -> None:
    """QAT and 75 % pruning then int8, fine-tuned by distillation, on the CartPole policy."""
    run = cartpole_policy_run["path"]
    for backend in ("tflite_qat", "tflite_prune75_int8"):
        cfg = compose_cfg(*_overrides(run, cache, backend, "edge.finetune_steps=400"))
        s = _edge(cfg, tmp_path_factory.mktemp(backend))
        fid = s["fidelity"]
        assert s["model_info"]["variant"] == "int8", backend  # quantized weights and activations
        assert fid["verdict"] == "passed" and fid["agreement"] >= 0.95, (backend, fid)
        assert fid["return_tie"] and min(fid["returns"]) >= 475, (backend, fid["returns"])
        built = s["calibration"]["compression"]
        assert built["distillation_observations"] == 200  # the calibration set
        # One guarded fine-tune per default rate; the lowest held-out error is the file.
        tried = built["lr_tried"]
        assert [t["lr"] for t in tried] == [3e-3, 1e-3, 3e-4]
        kept = min(tried, key=lambda t: t["holdout_loss_kept"])
        assert (
            built["lr_chosen"] == kept["lr"]
            and built["holdout_loss_kept"] == kept["holdout_loss_kept"]
        )
        if backend == "tflite_prune75_int8":
            # Sparsity measured in the final file: 75 % of every kernel is zero.
            assert s["weights"]["sparsity"] == pytest.approx(0.75, abs=0.01)
            assert s["model_gzip_bytes"] < 0.6 * s["model_size_bytes"]
        else:
            assert s["weights"]["sparsity"] < 0.1
            # QAT starts from the int8-quantized policy; the guard keeps it or better.
            assert all(t["holdout_loss_kept"] <= t["holdout_loss_start"] for t in tried)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["stage=edge", "backend=tflite_qat", "model_path=/x.tflite"],
         "backend=tflite_qat compresses the trained policy"),
        (["stage=edge", "backend=tflite_prune90", "run=/r", "edge.finetune_steps=0"],
         "edge.finetune_steps=0 must be > 0"),
        (["stage=edge", "backend=tflite_qat", "run=/r", "edge.finetune_lr=[]"],
         "edge.finetune_lr=[] must be a learning rate > 0 or a non-empty list of them"),
        (["stage=edge", "backend=tflite_qat", "run=/r", "edge.finetune_lr=[1e-3,-1]"],
         "edge.finetune_lr=[0.001, -1] must be a learning rate > 0"),
        (["stage=edge", "backend=tflite_qat", "run=/r", "edge.finetune_lr=fast"],
         "edge.finetune_lr=fast must be"),
        (["stage=serve", "backend=tflite_struct50", "run=/r"],
         "backend=tflite_struct50 with stage=serve"),
        (["stage=edge", "backend=edgetpu", "run=/r", "edge.edgetpu_source=tflite_fp16"],
         "edge.edgetpu_source=tflite_fp16 is not an int8 variant the Edge TPU compiler takes; "
         "valid: tflite_int8, tflite_qat, tflite_prune75_int8"),
        (["stage=edge", "backend=edgetpu", "model_path=/x.tflite",
          "edge.edgetpu_source=tflite_qat"],
         "edge.edgetpu_source=tflite_qat builds that variant from the trained policy"),
        (["stage=edge", "backend=edgetpu", "run=/r", "edge.edgetpu_source=tflite_qat",
          "edge.finetune_steps=0"], "edge.finetune_steps=0 must be > 0 for backend=tflite_qat"),
    ],
)  # fmt: skip
def test_compression_backends_are_checked_before_any_work(
    compose_cfg, overrides: list[str], fragment: str
) -> None:
    from rlperf.errors import ConfigError
    from rlperf.validation.validate import validate_config

    with pytest.raises(ConfigError, match=re.escape(fragment)):
        validate_config(compose_cfg(*overrides))


def test_compression_preset_sweeps_every_variant_with_the_reference(compose_cfg) -> None:
    import yaml

    from rlperf.config.schema import Backend
    from rlperf.specs.backends import COMPRESSION_BACKENDS
    from tests.conftest import CONF

    cfg = compose_cfg("experiment=compression", "run=/r")
    assert cfg.stage == "edge" and cfg.edge.episodes == 10
    preset = yaml.safe_load((CONF / "experiment" / "compression.yaml").read_text())
    swept = preset["hydra"]["sweeper"]["params"]["backend"].split(",")
    assert swept[0] == "rllib" and set(COMPRESSION_BACKENDS) <= set(swept) <= {
        b.value for b in Backend
    }
