"""What tracking costs a training run: phase times per iteration with and without it.

Runs the same short training (the tiny model, 8 iterations of 256 env steps, the driver
sampling) with ``tracking=[]``, with all three tools writing locally (MLflow's SQLite store,
TensorBoard's event files, W&B offline), with MLflow to a server on 127.0.0.1, and with
MLflow to a port nobody listens on; each variant after the other, ``--rounds`` times
(default 2), in one run. Prints, per variant, the median over its runs of the mean
iteration, sampling and learning times (warm-up excluded), the job's wall time and how
long the end waited for the tools (docs/tracking.md#the-measurement-comes-first).

    python benchmarks/bench_tracking.py              # about 6 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

TRAIN = [
    "model=tiny", "workers=0", "algo.train_batch_size=256", "algo.minibatch_size=128",
    "algo.num_epochs=1", "train.iterations=8", "telemetry.interval_s=0.5",
]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def mlflow_server(root: Path) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port",
            str(port), "--workers", "1", "--backend-store-uri",
            f"sqlite:///{root / 'server.db'}", "--artifacts-destination", str(root / "art"),
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    for _ in range(240):
        with contextlib.suppress(OSError):
            if urllib.request.urlopen(f"{uri}/health", timeout=2).status == 200:
                break
        time.sleep(0.5)
    try:
        yield uri
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _run(args: list[str], out: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-m", "rlperf", *TRAIN, *args, f"hydra.run.dir={out}"],
        cwd=out.parent, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"rlperf failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    metrics = summary["metrics"]
    return {
        "iter_s": metrics["iter_s"]["mean"],
        "sample_s": metrics["sample_s"]["mean"],
        "learn_s": metrics["learn_s"]["mean"],
        "wall_s": summary["wall_s"],
        "close_s": (summary.get("tracking") or {}).get("close_s", 0.0),
        "incidents": len(summary["incidents"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="trk", dir="/tmp") as work:
        root = Path(work)
        with mlflow_server(root) as uri:
            variants = {
                "tracking=[]": [],
                "all three, local": ["tracking=[mlflow,tensorboard,wandb]"],
                "mlflow, server on 127.0.0.1": ["tracking=mlflow", f"tracking.mlflow.uri={uri}"],
                "mlflow, dead port": [
                    "tracking=mlflow",
                    f"tracking.mlflow.uri=http://127.0.0.1:{_free_port()}",
                ],
            }
            results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
            for r in range(rounds):
                for i, (name, args) in enumerate(variants.items()):
                    results[name].append(_run(args, root / f"r{r}_{i}"))
    print("| tracking | iteration s | sample s | learn s | job wall s | end waited s | incidents |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, runs in results.items():

        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        print(
            f"| {name} | {med('iter_s'):.3f} | {med('sample_s'):.3f} | {med('learn_s'):.3f} "
            f"| {med('wall_s'):.1f} | {med('close_s'):.2f} | {int(med('incidents'))} |"
        )


if __name__ == "__main__":
    main()
