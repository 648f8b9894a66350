"""A real local Ray cluster for the Ray tests and ``bench ray``: a head and more nodes on this
machine, each its own ``ray start --block`` in its own session (``setsid``), in a temporary
folder; and the service deployed on it with ``wai-dispatch serve --ray``. Stopping signals
exactly those sessions' processes, never a process by name; a replica is found among them by
its process title."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx

#: In the process title of a replica of the service's deployment (Ray titles a worker
#: ``ray::ServeReplica:APP:DEPLOYMENT`` when idle, ``ray::SERVE_REPLICA::…:ServeReplica:APP:
#: DEPLOYMENT.METHOD`` while it runs a method).
REPLICA_TITLE = "ServeReplica:wai-dispatch:WaiDispatch"
#: Ports a node takes: its services, then its workers'.
NODE_PORTS = 40
#: The object store of each node (the service keeps nothing in it).
OBJECT_STORE_BYTES = 80 * 1024 * 1024
REPO = Path(__file__).resolve().parents[1]
#: Tries at starting the cluster (each from nothing).
STARTS = 3
#: What a client retries under the same ``X-Request-Id`` (docs/ray.md): Serve's proxy answers
#: 500 for a request in flight on a replica that died, 503 while no replica can take it.
RETRY_STATUSES = frozenset({500, 502, 503, 504})


def _free_block(size: int, start: int = 16000, stop: int = 17900) -> int:
    """The first port of ``size`` consecutive ports that bind on 127.0.0.1 now."""
    for base in range(start, stop - size, size):
        ok = True
        for port in range(base, base + size):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError(f"no {size} free consecutive ports in {start}–{stop}")


def _ray() -> str:
    found = Path(sys.executable).with_name("ray")
    return str(found) if found.exists() else "ray"


@dataclass
class LocalCluster:
    """A head and ``nodes - 1`` more nodes, ``cpus`` each; :attr:`address` is the head's GCS."""

    root: Path
    base: int
    nodes: int = 2
    cpus: int = 1
    env: dict[str, str] = field(default_factory=dict)
    starters: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.base}"

    @property
    def proxy_port(self) -> int:
        """A port for Serve's HTTP proxy (free when the cluster was planned)."""
        return self.base + NODE_PORTS * self.nodes

    def _args(self, k: int) -> list[str]:
        p = self.base + NODE_PORTS * k
        named = {
            "--node-manager-port": p + 1,
            "--object-manager-port": p + 2,
            "--dashboard-agent-listen-port": p + 3,
            "--dashboard-agent-grpc-port": p + 4,
            "--runtime-env-agent-port": p + 5,
            "--metrics-export-port": p + 6,
            "--min-worker-port": p + 10,
            "--max-worker-port": p + NODE_PORTS - 1,
        }
        args = [_ray(), "start", "--block", "--disable-usage-stats"]
        args += [f"--num-cpus={self.cpus}", f"--object-store-memory={OBJECT_STORE_BYTES}"]
        args += [f"{k}={v}" for k, v in named.items()]
        if k == 0:
            args += [
                "--head",
                f"--port={p}",
                f"--ray-client-server-port={p + 7}",
                "--include-dashboard=false",
                f"--temp-dir={self.root}",
            ]
        else:
            args += [f"--address={self.address}"]
        return args

    def start(self, timeout_s: float = 180.0) -> None:
        for k in range(self.nodes):
            with (self.root / f"node{k}.log").open("wb") as log:  # the child keeps its own
                self.starters.append(
                    subprocess.Popen(
                        self._args(k),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=self.env,
                        start_new_session=True,
                    )
                )
            deadline = time.monotonic() + timeout_s
            while b"block forever" not in (self.root / f"node{k}.log").read_bytes():
                if self.starters[-1].poll() is not None or time.monotonic() > deadline:
                    tail = (self.root / f"node{k}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"ray start (node {k}) did not start:\n{tail}")
                time.sleep(0.5)

    def processes(self) -> list[tuple[int, str]]:
        """(pid, title) of every live process of the cluster's sessions."""
        sessions = {p.pid for p in self.starters}
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            fields_ = stat.rsplit(")", 1)[1].split()
            if int(fields_[3]) in sessions and fields_[0] != "Z":
                found.append((int(entry.name), title))
        return found

    def replicas(self) -> list[int]:
        """The pids of the service's replicas, on every node."""
        return sorted(pid for pid, title in self.processes() if REPLICA_TITLE in title)

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM every process of the cluster's sessions, SIGKILL what is left after
        ``grace_s``; then remove the folder."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            for pid, _ in self.processes():
                with suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while self.processes() and time.monotonic() < deadline:
                time.sleep(0.2)
            if not self.processes():
                break
        for starter in self.starters:
            try:
                starter.wait(timeout=5)
            except subprocess.TimeoutExpired:
                starter.kill()
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def local_cluster(nodes: int = 2, cpus: int = 1) -> Iterator[LocalCluster]:
    """A started :class:`LocalCluster`, stopped when the block ends (on failure too). The
    nodes' workers import ``wai_dispatch`` from this checkout (``PYTHONPATH``)."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    for attempt in range(1, STARTS + 1):
        root = Path(tempfile.mkdtemp(prefix="wai-ray-"))
        cluster = LocalCluster(root, _free_block(NODE_PORTS * nodes + 1), nodes, cpus, env)
        try:
            cluster.start()
            break
        except RuntimeError:
            # `ray start` gives a node 30 s to register, which a loaded machine can miss
            cluster.stop()
            if attempt == STARTS:
                raise
    try:
        yield cluster
    finally:
        cluster.stop()


def deploy(
    cluster: LocalCluster, settings: Mapping[str, str], *flags: str, timeout_s: float = 300
) -> str:
    """``wai-dispatch serve --ray ADDRESS --port P --detach FLAGS`` with ``settings`` (``WAI_*``
    variables) in its environment; what it printed. Raises with its output when it fails."""
    argv = [
        sys.executable,
        "-m",
        "wai_dispatch",
        "serve",
        "--ray",
        cluster.address,
        "--port",
        str(cluster.proxy_port),
        "--detach",
        *flags,
    ]
    done = subprocess.run(
        argv, env={**cluster.env, **settings}, capture_output=True, text=True, timeout=timeout_s
    )
    if done.returncode != 0:
        raise RuntimeError(f"serve --ray exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def replica_rss_mib(cluster: LocalCluster) -> dict[int, float]:
    """Resident memory (VmRSS, MiB) of each replica process."""
    out = {}
    for pid in cluster.replicas():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        out[pid] = kib / 1024
    return out


def post_retrying(
    client: httpx.Client,
    path: str,
    body: bytes,
    headers: Mapping[str, str],
    attempts: int = 5,
    pause_s: float = 0.5,
) -> tuple[httpx.Response | None, list[str]]:
    """POST ``body`` as docs/ray.md's client does: under one ``X-Request-Id`` (``headers``'
    or a new one), retried after a transport error or a :data:`RETRY_STATUSES` answer, the
    pause doubling from ``2 × pause_s`` up to 8 s. The last answer (``None``: every try
    failed) and what each failed try got (a status, or the transport error's name)."""
    sent = {"X-Request-Id": str(uuid.uuid4()), **headers}
    failed: list[str] = []
    for attempt in range(attempts):
        if attempt:
            time.sleep(min(8.0, pause_s * 2**attempt))
        try:
            got = client.post(path, content=body, headers=sent)
        except httpx.TransportError as exc:
            failed.append(type(exc).__name__)
            continue
        if got.status_code not in RETRY_STATUSES:
            return got, failed
        failed.append(str(got.status_code))
    return None, failed
