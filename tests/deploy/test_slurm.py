"""The cluster recipes in deploy/: KubeRay manifests checked for what KubeRay requires, and the Slurm script run
for real on this machine, its Ray head and worker started and stopped by its own functions.

The manifest rules come from KubeRay's CRDs (ray-operator/config/crd/bases/ray.io_rayjobs.yaml and
ray.io_rayclusters.yaml, apiVersion ray.io/v1) and its webhook-free validation
(ray-operator/controllers/ray/utils/validation.go): ``headGroupSpec.template`` and, per worker group,
``groupName``, ``minReplicas``, ``maxReplicas`` and ``template`` are required; ``rayStartParams`` maps strings
to strings; a pod template needs containers; ``minReplicas <= maxReplicas``; a RayJob with
``ttlSecondsAfterFinished > 0`` needs ``shutdownAfterJobFinishes``; names are DNS-1035 labels of at most 47
(RayJob) or 53 (RayCluster) characters. No Kubernetes here: the manifests are not applied.
"""

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from sweep.analysis.sql import run_query
from sweep.space.loader import load_space
from tests.helpers import TINY_SPACE_BODY

ROOT = Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "deploy" / "kuberay"
SLURM = ROOT / "deploy" / "slurm"
SHELL_SCRIPTS = sorted([*SLURM.glob("*.sh"), *SLURM.glob("*.sbatch")])
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME = {"RayJob": 47, "RayCluster": 53}  # KubeRay's MaxRayJobNameLength, MaxRayClusterNameLength
# rayStartParams that set resources: KubeRay rejects them beside a group's `resources` field
RESOURCE_PARAMS = {"num-cpus", "num-gpus", "memory", "resources"}


def manifests() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(KUBERAY.glob("*.yaml")):
        docs += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return docs


def ray_manifests() -> list[tuple[str, str, dict]]:
    """(file, kind, the RayCluster spec): a RayCluster's own, a RayJob's rayClusterSpec."""
    found = []
    for name, doc in manifests():
        if doc["kind"] == "RayCluster":
            found.append((name, "RayCluster", doc["spec"]))
        elif doc["kind"] == "RayJob":
            found.append((name, "RayJob", doc["spec"]["rayClusterSpec"]))
    return found


def locked_ray_version() -> str:
    (version,) = re.findall(r"^ray==(\S+)$", (ROOT / "requirements.lock").read_text(), re.M)
    return version


def pod_containers(group: dict) -> list[dict]:
    return group["template"]["spec"]["containers"]


def quantity(value) -> float:
    """A Kubernetes CPU or count quantity: 4, "4", "500m"."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def test_ray_manifests_exist_and_use_ray_io_v1():
    kinds = [doc["kind"] for _, doc in manifests()]
    assert "RayJob" in kinds and "RayCluster" in kinds, kinds
    for name, doc in manifests():
        assert {"apiVersion", "kind", "metadata"} <= doc.keys(), name
        if doc["kind"] in MAX_NAME:
            assert doc["apiVersion"] == "ray.io/v1", name
            meta_name = doc["metadata"]["name"]
            assert DNS_1035.match(meta_name) and len(meta_name) <= MAX_NAME[doc["kind"]], (name, meta_name)


@pytest.mark.parametrize(("name", "kind", "spec"), [pytest.param(*m, id=f"{m[0]}:{m[1]}") for m in ray_manifests()])
def test_cluster_spec_has_what_kuberay_requires(name, kind, spec):
    assert spec["rayVersion"] == locked_ray_version(), f"{name}: rayVersion is not requirements.lock's Ray"
    groups = [("head", spec["headGroupSpec"])] + [(g.get("groupName"), g) for g in spec["workerGroupSpecs"]]
    assert len(groups) >= 2, f"{name}: no worker group"
    for group_name, group in groups:
        where = f"{name}: {group_name}"
        params = group["rayStartParams"]
        assert isinstance(params, dict), where
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()), (where, params)
        assert not (RESOURCE_PARAMS & params.keys() and group.get("resources")), where
        containers = pod_containers(group)
        assert containers, where
        for container in containers:
            assert DNS_1035.match(container["name"]) and container["image"], (where, container)
        mounts = {m["name"] for c in containers for m in c.get("volumeMounts", [])}
        volumes = {v["name"] for v in group["template"]["spec"].get("volumes", [])}
        assert mounts <= volumes, (where, mounts - volumes)
    for group in spec["workerGroupSpecs"]:
        where = f"{name}: {group['groupName']}"
        assert {"groupName", "minReplicas", "maxReplicas", "template"} <= group.keys(), where
        assert 0 <= group["minReplicas"] <= group.get("replicas", 0) <= group["maxReplicas"], where
        (worker,) = pod_containers(group)
        limits = worker["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) >= 1, f"{where}: no GPU limit"
        assert quantity(limits["cpu"]) >= 1, where
    if kind == "RayJob":
        (job,) = [doc for file, doc in manifests() if file == name and doc["kind"] == "RayJob"]
        assert job["spec"]["shutdownAfterJobFinishes"] is True
        assert isinstance(job["spec"]["ttlSecondsAfterFinished"], int) and job["spec"]["ttlSecondsAfterFinished"] >= 0


def test_every_pod_runs_the_image_the_dockerfile_builds_on_the_locked_ray():
    groups = [g for _, _, spec in ray_manifests() for g in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]]
    images = {c["image"] for g in groups for c in pod_containers(g)}
    assert len(images) == 1, images
    dockerfile = (KUBERAY / "Dockerfile").read_text()
    (base,) = re.findall(r"^ARG RAY_IMAGE=rayproject/ray:(\S+)$", dockerfile, re.M)
    assert base.split("-")[0] == locked_ray_version()
    assert images.pop() in dockerfile  # the build command there tags the image the manifests pull


def test_rayjob_runs_a_shipped_space_on_the_gpu_workers_with_results_on_the_shared_volume():
    (job,) = [doc for _, doc in manifests() if doc["kind"] == "RayJob"]
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:2] == ["sweep", "run"] and argv[3] == "--profile" and argv[5] == "--results", argv
    space_name, profile, results = argv[2], argv[4], argv[6]
    _, space, _ = load_space(space_name, profile)
    resources = space.resources
    assert resources.gpus_per_trial > 0, "the RayJob's space must train on the GPU workers"
    cluster = job["spec"]["rayClusterSpec"]
    (worker_group,) = cluster["workerGroupSpecs"]
    (worker,) = pod_containers(worker_group)
    limits = worker["resources"]["limits"]
    per_worker = resources.workers_per_trial
    assert resources.gpus_per_trial / per_worker <= int(limits["nvidia.com/gpu"]), "a trial's GPUs fit no pod"
    assert resources.cpus_per_trial / per_worker <= quantity(limits["cpu"]), "a trial's CPUs fit no pod"
    (pvc,) = [doc for _, doc in manifests() if doc["kind"] == "PersistentVolumeClaim"]
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]
    for group in [cluster["headGroupSpec"], worker_group]:  # the driver writes there; trials checkpoint there
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in group["template"]["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        }
        (container,) = pod_containers(group)
        mounted = {m["mountPath"]: claims.get(m["name"]) for m in container["volumeMounts"]}
        assert mounted.get(results) == pvc["metadata"]["name"], (results, mounted)


def documented_runs() -> list[tuple[str, str, str]]:
    """Every `sweep run SPACE --profile P` and `sweep.sbatch SPACE P` the recipes and docs show, and the
    sbatch script's defaults: (where, space, profile)."""
    runs = []
    for path in [*KUBERAY.glob("*.yaml"), *SHELL_SCRIPTS, ROOT / "docs" / "clusters.md"]:
        text = path.read_text()
        for pattern in [r"sweep run (\w+) --profile (\w+)", r"sweep\.sbatch (\w+) (\w+)"]:
            runs += [(path.name, space, profile) for space, profile in re.findall(pattern, text)]
    sbatch = (SLURM / "sweep.sbatch").read_text()
    (space,) = re.findall(r"^SPACE=\$\{1:-\$\{SPACE:-(\w+)\}\}$", sbatch, re.M)
    (profile,) = re.findall(r"^PROFILE=\$\{2:-\$\{PROFILE:-(\w+)\}\}$", sbatch, re.M)
    return [*runs, ("sweep.sbatch defaults", space, profile)]


def test_every_documented_run_names_a_shipped_space_and_profile():
    runs = documented_runs()
    assert {where for where, _, _ in runs} >= {"rayjob.yaml", "raycluster.yaml", "clusters.md"}, runs
    for _where, space, profile in runs:
        load_space(space, profile)  # raises on an unknown space or profile


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_parse(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shell_scripts_pass_shellcheck():
    result = subprocess.run(
        ["shellcheck", "-x", *(str(p.relative_to(ROOT)) for p in SHELL_SCRIPTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout


def sourced(snippet: str, tmp_path: Path, **env: str) -> list[str]:
    """Run ``snippet`` in bash after sourcing ray_cluster.sh, with fake ``srun``, ``scontrol`` and ``hostname``
    first on PATH (srun writes its options to srun.log, then runs the command; scontrol expands a two-node
    list; hostname prints two addresses); the output's lines."""
    fakes = tmp_path / "fake-bin"
    fakes.mkdir(exist_ok=True)
    log = tmp_path / "srun.log"
    scripts = {
        "srun": f'while [[ $1 != -w ]]; do echo "$1" >>{log}; shift; done; echo "-w $2" >>{log}; shift 2; exec "$@"',
        "scontrol": '[[ "$*" == "show hostnames gpu[01-02]" ]] && printf "gpu01\\ngpu02\\n"',
        "hostname": 'echo "10.1.2.3 fe80::1"',
    }
    for name, body in scripts.items():
        (fakes / name).write_text(f"#!/bin/bash\n{body}\n")
        (fakes / name).chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SLURM_"))}
    result = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source deploy/slurm/ray_cluster.sh; {snippet}"],
        cwd=ROOT,
        env={**clean, "PATH": f"{fakes}{os.pathsep}{clean['PATH']}", **env},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_slurm_defaults_take_nodes_cpus_and_the_head_address_from_the_job(tmp_path):
    job = {"SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_CPUS_PER_TASK": "32"}
    assert sourced("ray_cluster_nodes", tmp_path, **job) == ["gpu01", "gpu02"]
    assert sourced("RAY_NODES='a b' ray_cluster_nodes", tmp_path, **job) == ["a", "b"]
    # a node's command goes through srun, one task on that node, with the job's CPUs
    assert sourced("(ray_exec_on gpu02 echo started)", tmp_path, **job) == ["started"]
    srun_options = (tmp_path / "srun.log").read_text().splitlines()
    assert srun_options == ["--nodes=1", "--ntasks=1", "--overlap", "--cpus-per-task=32", "-w gpu02"]
    assert sourced("ray_cluster_head_ip gpu01", tmp_path, **job) == ["10.1.2.3"]  # the first address, on gpu01
    assert (tmp_path / "srun.log").read_text().splitlines()[-1] == "-w gpu01"
    started = "RAY_CLUSTER_HEAD_IP=10.1.2.3 RAY_CLUSTER_ADDRESS=10.1.2.3:6379 ray_cluster_start_args"  # as set by start
    head = sourced(f"{started} head", tmp_path, **job)
    assert {"--block", "--head", "--node-ip-address=10.1.2.3", "--port=6379", "--num-cpus=32"} <= set(head), head
    worker = sourced(f"{started} worker", tmp_path, **job, RAY_HEAD_NUM_CPUS="0")
    assert {"--block", "--address=10.1.2.3:6379", "--num-cpus=32"} <= set(worker) and "--head" not in worker, worker
    assert "--num-cpus=0" in sourced(f"{started} head", tmp_path, **job, RAY_HEAD_NUM_CPUS="0")


# --- the Slurm recipe, run on 127.0.0.1 ---------------------------------------------------------------------

# Two one-step trials of a tiny ViT on the embedded digits: about a second each.
TINY = (
    "question: the Slurm recipe's smoke sweep\n"
    + TINY_SPACE_BODY
    + """\
profiles:
  smoke: {description: the two-trial grid}
"""
)


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def marked_pids(marker: str) -> set[int]:
    """Processes whose environment holds ``marker``: every process this test started, Ray's included (each
    inherits its parent's environment), and nobody else's."""
    needle = marker.encode()
    pids = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if needle in (proc / "environ").read_bytes():
                    pids.add(int(proc.name))
            except OSError:  # gone, or not ours to read
                pass
    return pids


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds its processes through /proc")
def test_slurm_script_runs_a_sweep_on_a_two_node_ray_and_stops_it(tmp_path):
    """`bash deploy/slurm/sweep.sbatch` without Slurm: RAY_LAUNCHER=local starts the head and one worker on
    this machine (the node list names 127.0.0.1 twice), on free ports, each with its own temp dir. The head
    offers no CPU, so the trials can only run on the worker that the script's functions started and waited
    for; the driver reaches them through RAY_ADDRESS. On exit, the trap stops both nodes."""
    space = tmp_path / "tiny.yaml"
    space.write_text(textwrap.dedent(TINY))
    results = tmp_path / "results"
    token = uuid.uuid4().hex
    marker = f"SWEEP_DEPLOY_TEST={token}"
    gcs_port, dashboard_port, head_agent_port, worker_agent_port = free_ports(4)
    # Ray's socket paths must stay short (107 bytes): private temp dirs directly under /tmp
    head_tmp, worker_tmp = (tempfile.mkdtemp(prefix=f"rd{role}", dir="/tmp") for role in "hw")
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SLURM_"))}
    env.update(
        {
            "SWEEP_DEPLOY_TEST": token,
            "HOME": str(tmp_path / "home"),  # Ray's auth token goes to ~/.ray: this test's, not the user's
            "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])]),
            "SWEEP": f"{sys.executable} -m sweep.cli",
            "RESULTS": str(results),
            "RAY_CMD": str(bin_dir / "ray"),
            "RAY_PYTHON": sys.executable,
            "RAY_NODES": "127.0.0.1 127.0.0.1",
            "RAY_LAUNCHER": "local",
            "RAY_HEAD_IP": "127.0.0.1",
            "RAY_PORT": str(gcs_port),
            "RAY_DASHBOARD_PORT": str(dashboard_port),
            "RAY_HEAD_NUM_CPUS": "0",
            "RAY_NUM_CPUS": "1",
            "RAY_HEAD_ARGS": f"--temp-dir={head_tmp} --dashboard-agent-listen-port={head_agent_port}",
            "RAY_WORKER_ARGS": f"--temp-dir={worker_tmp} --dashboard-agent-listen-port={worker_agent_port}",
            "RAY_WAIT_S": "60",
            "RAY_STOP_WAIT_S": "20",
        }
    )
    seen: set[int] = set()  # every marked process seen while the script ran
    script = subprocess.Popen(
        ["bash", "deploy/slurm/sweep.sbatch", str(space), "smoke", "--quiet"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(script.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 150
        while script.poll() is None and time.monotonic() < deadline:
            seen |= marked_pids(marker)
            time.sleep(0.5)
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGTERM)  # the trap still stops Ray
            script.wait(timeout=30)
            pytest.fail("sweep.sbatch did not finish within 150 s:\n" + "".join(output))
        reader.join(timeout=10)
        log = "".join(output)
        assert script.returncode == 0, log
        assert "ray_cluster: 2 nodes up" in log, log
        (worker_id,) = re.findall(r"ray_cluster: worker (\w+) at", log)
        _, trials = run_query(results, "SELECT status, node_id, num_heads FROM trials ORDER BY num_heads")
        assert trials == [("ok", worker_id, 2), ("ok", worker_id, 4)], (trials, log)
        assert len(seen) >= 6, seen  # two `ray start`, GCS, two raylets, their agents and workers: the marker works
        assert marked_pids(marker) == set(), "Ray processes left running after the script stopped"
    finally:
        for pid in marked_pids(marker):  # only after a failure: leave nothing of this test behind
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for path in (head_tmp, worker_tmp):
            shutil.rmtree(path, ignore_errors=True)
