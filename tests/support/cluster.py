"""A Ray cluster on this machine that behaves like one: nodes that share no files, and an
S3-compatible object store on 127.0.0.1 (issue: clusters without a shared filesystem).

- The head node runs where the test runs (it sees the test's folders).
- Each worker node runs in its own mount namespace (``unshare -m``, root) with a private
  tmpfs over ``hidden`` (the folder the sweep folder lies in): it sees the code and the
  venv but none of the sweep's files, and what it writes there only it sees.
- Every node has its own Ray temp dir (``--temp-dir``): Tune's staging and trial working
  folders live there, and nodes sharing one would let a test pass that should fail.
- Network namespaces are not used: a worker node in one would have a loopback of its
  own, and reaching the head (which rlperf's rules keep on 127.0.0.1) would need a veth
  pair and addresses beyond loopback. The nodes share the network and nothing else.
- :class:`ObjectStore`: ``moto[server]``'s S3 server on 127.0.0.1 with a bucket, and
  fake credentials recognisable in any file they leak into.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.support.private_ray import processes_with, terminate

#: Fake credentials: recognisable in any file they leak into.
FAKE_KEY_ID = "AKIARLPERFLEAKCHECK7"
FAKE_SECRET = "rlperf/leak-check/Secret+Key/0123456789ab"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def namespaces_usable() -> str | None:
    """None when this process can give a node its own mount namespace and tmpfs; else why
    not (a skip reason)."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    if os.geteuid() != 0:
        return "a private mount namespace and tmpfs need root (CI runs as root)"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         "mount -t tmpfs tmpfs /mnt && umount /mnt"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"unshare -m with a tmpfs failed here: {probe.stderr.strip()[:200]}"
    return None


@dataclass
class ObjectStore:
    """moto's S3 server on 127.0.0.1 with one bucket."""

    port: int
    bucket: str
    proc: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def uri(self, prefix: str) -> str:
        """The storage URI of ``prefix`` in the bucket, as a user writes it."""
        return f"s3://{self.bucket}/{prefix}?endpoint_override=127.0.0.1:{self.port}&scheme=http"

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=FAKE_KEY_ID,
            aws_secret_access_key=FAKE_SECRET, region_name="us-east-1",
        )  # fmt: skip

    def objects(self, prefix: str = "") -> list[str]:
        pages = (
            self.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=self.bucket, Prefix=prefix)
        )
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def read(self, key: str) -> bytes:
        return bytes(self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read())


@contextmanager
def object_store(bucket: str = "rlperf") -> Iterator[ObjectStore]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    store = ObjectStore(port, bucket, proc)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                store.client().create_bucket(Bucket=bucket)
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield store
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def credentials() -> dict[str, str]:
    """The fake credentials as the environment gives them (the standard AWS variables)."""
    return {
        "AWS_ACCESS_KEY_ID": FAKE_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
    }


@dataclass
class Cluster:
    """A head node and worker nodes started by ``ray start``; see the module's docstring."""

    root: Path  # the nodes' temp dirs live under it
    address: str
    env: dict[str, str]  # what a driver (the rlperf launcher) runs with
    workers: list[subprocess.Popen[str]] = field(default_factory=list)
    temp_dirs: list[Path] = field(default_factory=list)
    hidden: Path | None = None  # each worker node's private tmpfs is mounted over it
    worker_env: dict[str, str] = field(default_factory=dict)

    def add_worker(self, cpus: int, wait: bool = True) -> int:
        """Start one more worker node (its own mount namespace and temp dir, a tmpfs over
        ``hidden``); its index. ``wait``: until the cluster counts it alive."""
        i = len(self.workers)
        tmp = Path(f"/tmp/rlc-{secrets.token_hex(3)}-w{i}")
        self.temp_dirs.append(tmp)
        cmd = (
            f"mount -t tmpfs tmpfs {self.hidden} && exec {_ray_cli()} start "
            f"--address={self.address} --num-cpus={cpus} --num-gpus=0 --temp-dir={tmp} "
            f"--disable-usage-stats --block"
        )
        log = open(self.root / f"worker{i}.log", "w")  # noqa: SIM115 (the node's lifetime)
        self.workers.append(
            subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "sh", "-c", cmd],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                env=self.worker_env,
                start_new_session=True,
            )  # fmt: skip
        )
        if wait:
            self.node_id(i)
        return i

    def node_id(self, worker: int, timeout: float = 120) -> str:
        """Ray's id of worker node ``worker`` once it is alive (its raylet's socket lies in
        its temp dir)."""
        marker = str(self.temp_dirs[worker + 1])
        code = (
            f"import ray; ray.init(address='{self.address}', logging_level='ERROR');"
            f"print(*[n['NodeID'] for n in ray.nodes() "
            f"if n['Alive'] and '{marker}' in n['RayletSocketName']])"
        )
        deadline = time.monotonic() + timeout
        while True:
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 env=self.env, timeout=120)  # fmt: skip
            lines = out.stdout.strip().splitlines()
            if lines and lines[-1].strip():
                return lines[-1].split()[-1]
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker node {worker} not alive in {timeout} s")
            time.sleep(1)

    def raylet(self, worker: int = 0) -> psutil.Process | None:
        """The raylet of worker node ``worker`` (its temp dir is in the command line)."""
        found = processes_with(str(self.temp_dirs[worker + 1]))
        return next((p for p in found if "raylet" in p.name()), None)

    def processes(self) -> list[psutil.Process]:
        """Every process of this cluster's nodes; Ray's agents rename themselves
        (``ray::DashboardAgent``), so they are found as the raylets' children."""
        found = [p for t in self.temp_dirs for p in processes_with(str(t))]
        for proc in list(found):
            with contextlib.suppress(psutil.Error):
                found.extend(c for c in proc.children(recursive=True) if c not in found)
        return found


def _ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


@contextmanager
def cluster(
    root: Path, hidden: Path, head_cpus: int = 1, worker_cpus: tuple[int, ...] = (2,),
    worker_env: dict[str, str] | None = None,
) -> Iterator[Cluster]:  # fmt: skip
    """A head with ``head_cpus`` and one worker node per ``worker_cpus`` entry, each in its
    own mount namespace with a tmpfs over ``hidden``. ``worker_env``: more variables for
    the worker nodes (the credentials are *not* given to them: they must come from the
    driver's Ray job)."""
    port = free_port()
    token = secrets.token_hex(32)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, PYTHONUNBUFFERED="1")
    # A lost node declared dead after 2 missed health checks 1 s apart (Ray: 5 x 3 s).
    base.update(RAY_health_check_period_ms="1000", RAY_health_check_failure_threshold="2")
    base.pop("RAY_ADDRESS", None)
    head_tmp = Path(f"/tmp/rlc-{secrets.token_hex(3)}-h")
    temp_dirs = [head_tmp]
    cl = Cluster(root, f"127.0.0.1:{port}", dict(base), temp_dirs=temp_dirs)
    try:
        start = subprocess.run(
            [_ray_cli(), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
             "--include-dashboard=false", f"--num-cpus={head_cpus}", "--num-gpus=0",
             f"--temp-dir={head_tmp}", "--disable-usage-stats"],
            capture_output=True, text=True, timeout=180, env=base,
        )  # fmt: skip
        if start.returncode != 0:
            raise RuntimeError(f"ray start --head failed: {start.stderr[-2000:]}")
        hidden.mkdir(parents=True, exist_ok=True)
        cl.hidden, cl.worker_env = hidden, {**base, **(worker_env or {})}
        for cpus in worker_cpus:
            cl.add_worker(cpus, wait=False)
        _wait_nodes(cl, 1 + len(worker_cpus))
        yield cl
    finally:
        # Only this cluster's processes (never `ray stop`: other tests' Rays run beside).
        for w in cl.workers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGTERM)
        terminate(cl.processes(), 20.0)
        for w in cl.workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(w.pid, signal.SIGKILL)
        for tmp in temp_dirs:
            shutil.rmtree(tmp, ignore_errors=True)
        for folder in {os.environ.get("RAY_TMPDIR") or "/tmp/ray", "/tmp/ray"}:
            current = Path(folder, "ray_current_cluster")
            with contextlib.suppress(OSError):
                if str(port) in current.read_text():
                    current.unlink()


def _count_nodes(cl: Cluster) -> int:
    code = (
        f"import ray; ray.init(address='{cl.address}', logging_level='ERROR');"
        "print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=cl.env, timeout=120)  # fmt: skip
    return int(out.stdout.strip()) if out.stdout.strip().isdigit() else 0


def _wait_nodes(cl: Cluster, count: int, timeout: float = 120) -> None:
    """Until ``count`` nodes are alive."""
    deadline = time.monotonic() + timeout
    while _count_nodes(cl) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} Ray nodes not alive in {timeout} s")
        time.sleep(1)
