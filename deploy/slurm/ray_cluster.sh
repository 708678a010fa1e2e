# shellcheck shell=bash
# Start and stop a Ray cluster across the nodes of a Slurm allocation: a Ray head on the first node, a Ray
# worker on each of the others. Sourced by sweep.sbatch; it runs without Slurm too (RAY_LAUNCHER=local starts
# every node on this machine, which is how tests/deploy/test_slurm.py runs it on 127.0.0.1).
#
#   source deploy/slurm/ray_cluster.sh
#   trap ray_cluster_stop EXIT
#   ray_cluster_start                      # returns once every node has joined; sets RAY_CLUSTER_ADDRESS
#   RAY_ADDRESS=$RAY_CLUSTER_ADDRESS sweep run SPACE ...
#
# Settings, from the environment (the defaults fit a Slurm job with one task per node):
#   RAY_NODES              the nodes, space-separated; the first is the head
#                          (default: scontrol show hostnames "$SLURM_JOB_NODELIST")
#   RAY_LAUNCHER           how a command runs on a node: srun (default) or local (on this machine, node ignored)
#   RAY_SRUN               the srun command a node's command goes through (default: srun --nodes=1 --ntasks=1
#                          --overlap --cpus-per-task=$SLURM_CPUS_PER_TASK; -w NODE is appended)
#   RAY_HEAD_IP            the head's address, for the workers and the driver
#                          (default: the first address `hostname --ip-address` prints on the head node)
#   RAY_PORT               the head's GCS port (default 6379, Ray's)
#   RAY_CLIENT_SERVER_PORT the head's Ray Client port (default: unset, Ray's 10001; needs ray[client])
#   RAY_DASHBOARD_PORT     the head's dashboard port (default: unset, Ray's 8265; it listens on 127.0.0.1
#                          unless RAY_HEAD_ARGS has --dashboard-host)
#   RAY_NUM_CPUS           CPUs each node offers to trials (default $SLURM_CPUS_PER_TASK; empty: Ray counts them)
#   RAY_HEAD_NUM_CPUS      CPUs the head offers (default RAY_NUM_CPUS; 0 keeps trials off the head)
#   RAY_NUM_GPUS           GPUs each node offers (default empty: Ray counts those in CUDA_VISIBLE_DEVICES,
#                          which Slurm sets to the job's GPUs)
#   RAY_START_ARGS         more `ray start` options for every node; RAY_HEAD_ARGS / RAY_WORKER_ARGS for the
#                          head / the workers only (word-split: no spaces inside one option)
#   RAY_CMD                the ray command (default: ray)
#   RAY_PYTHON             the Python with ray installed, used to count the nodes (default: python3)
#   RAY_LOG_DIR            each node's `ray start` output (default: ${TMPDIR:-/tmp}/ray-cluster-$SLURM_JOB_ID)
#   RAY_AUTH_MODE          token (default) or disabled; RAY_AUTH_TOKEN: the token (see ray_cluster_auth)
#   RAY_WAIT_S             seconds to wait for each node's Ray to start, and for all to join (default 300)
#   RAY_STOP_WAIT_S        seconds a node gets to stop after SIGTERM before SIGKILL (default 30)
#
# Every node runs `ray start --block` in the background: the process stays in the foreground of its srun step
# (Slurm kills what a finished step leaves behind, so a daemonised `ray start` would die with its step), and
# SIGTERM to it (srun forwards it) stops that node's Ray processes. Stopping signals exactly the processes
# started here; it never runs `ray stop`, which would also stop other Ray instances of the same user on a node.

RAY_CLUSTER_PIDS=()       # the background `ray start --block` (or srun) processes, head first
RAY_CLUSTER_LOGS=()       # their output files, in the same order
RAY_CLUSTER_ADDRESS=""    # HEAD_IP:PORT once the head is up

ray_cluster_nodes() {
    if [[ -n "${RAY_NODES:-}" ]]; then
        local -a nodes
        read -ra nodes <<<"$RAY_NODES"
        printf '%s\n' "${nodes[@]}"
    elif [[ -n "${SLURM_JOB_NODELIST:-}" ]]; then
        scontrol show hostnames "$SLURM_JOB_NODELIST"
    else
        echo "ray_cluster: no nodes: set RAY_NODES (e.g. RAY_NODES='127.0.0.1 127.0.0.1' RAY_LAUNCHER=local)" \
            "or run inside a Slurm job" >&2
        return 2
    fi
}

# Token authentication, decided once for every process of the cluster. A head started by `ray start --head`
# turns it on by itself when ~/.ray/auth_token exists, but workers and drivers given an address do not, and
# then fail with "InvalidAuthToken"; so the mode is exported: RAY_AUTH_MODE (default token) and, in token mode,
# RAY_AUTH_TOKEN (default: the one in ~/.ray/auth_token, made by `ray get-auth-token --generate` if missing).
# srun passes the environment on to every node; the driver inherits it. A Ray without token authentication
# (no `ray get-auth-token`) is left as it is.
ray_cluster_auth() {
    if ! "${RAY_CMD:-ray}" get-auth-token --help >/dev/null 2>&1; then
        return 0
    fi
    export RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}
    if [[ "$RAY_AUTH_MODE" != token || -n "${RAY_AUTH_TOKEN:-}" ]]; then
        return 0
    fi
    if ! RAY_AUTH_TOKEN=$("${RAY_CMD:-ray}" get-auth-token --generate 2>/dev/null) || [[ -z "$RAY_AUTH_TOKEN" ]]; then
        echo "ray_cluster: no Ray authentication token: run \`ray get-auth-token --generate\`, set RAY_AUTH_TOKEN," \
            "or set RAY_AUTH_MODE=disabled" >&2
        return 1
    fi
    export RAY_AUTH_TOKEN
}

# Replaces the current process with COMMAND run on NODE: call it in the background (&) or in $( ).
ray_exec_on() {
    local node=$1
    shift
    case "${RAY_LAUNCHER:-srun}" in
        srun)
            local -a srun_cmd
            local default="srun --nodes=1 --ntasks=1 --overlap"
            # --cpus-per-task again: srun 22.05 to 23.02 do not take it from the job's
            default+=${SLURM_CPUS_PER_TASK:+ --cpus-per-task=$SLURM_CPUS_PER_TASK}
            read -ra srun_cmd <<<"${RAY_SRUN:-$default}"
            exec "${srun_cmd[@]}" -w "$node" "$@"
            ;;
        local) exec "$@" ;;
        *)
            echo "ray_cluster: RAY_LAUNCHER must be srun or local, but got '${RAY_LAUNCHER}'" >&2
            exit 2
            ;;
    esac
}

ray_cluster_head_ip() {
    if [[ -n "${RAY_HEAD_IP:-}" ]]; then
        echo "$RAY_HEAD_IP"
        return
    fi
    local addresses
    addresses=$(ray_exec_on "$1" hostname --ip-address) || return
    echo "${addresses%% *}"  # the first of several (IPv4 before IPv6 on most systems)
}

# ray start options for one node: ray_cluster_start_args head|worker
ray_cluster_start_args() {
    local role=$1 cpus=${RAY_NUM_CPUS-${SLURM_CPUS_PER_TASK:-}}
    local -a args extra
    if [[ "$role" == head ]]; then
        cpus=${RAY_HEAD_NUM_CPUS-$cpus}
        args=(--head --node-ip-address="$RAY_CLUSTER_HEAD_IP" --port="${RAY_PORT:-6379}")
        if [[ -n "${RAY_CLIENT_SERVER_PORT:-}" ]]; then
            args+=(--ray-client-server-port="$RAY_CLIENT_SERVER_PORT")
        fi
        if [[ -n "${RAY_DASHBOARD_PORT:-}" ]]; then args+=(--dashboard-port="$RAY_DASHBOARD_PORT"); fi
        read -ra extra <<<"${RAY_START_ARGS:-} ${RAY_HEAD_ARGS:-}"
    else
        args=(--address="$RAY_CLUSTER_ADDRESS")
        read -ra extra <<<"${RAY_START_ARGS:-} ${RAY_WORKER_ARGS:-}"
    fi
    if [[ -n "$cpus" ]]; then args+=(--num-cpus="$cpus"); fi
    if [[ -n "${RAY_NUM_GPUS:-}" ]]; then args+=(--num-gpus="$RAY_NUM_GPUS"); fi
    printf '%s\n' --block --disable-usage-stats "${args[@]}" "${extra[@]}"
}

# Starts `ray start --block` on NODE in the background, its output in RAY_LOG_DIR/INDEX-ROLE-NODE.log.
ray_cluster_launch() {
    local index=$1 role=$2 node=$3
    local -a args
    mapfile -t args < <(ray_cluster_start_args "$role")
    local log="$RAY_LOG_DIR/$index-$role-$node.log"
    echo "ray_cluster: starting the $role on $node (log: $log)"
    ray_exec_on "$node" "${RAY_CMD:-ray}" start "${args[@]}" >"$log" 2>&1 &
    RAY_CLUSTER_PIDS+=("$!")
    RAY_CLUSTER_LOGS+=("$log")
}

# Waits until the node started INDEX-th says "Ray runtime started.", or RAY_WAIT_S passes, or it exits.
ray_cluster_wait_started() {
    local index=$1 log=$2 deadline=$((SECONDS + ${RAY_WAIT_S:-300}))
    until grep -q "Ray runtime started" "$log" 2>/dev/null; do
        if ((SECONDS >= deadline)) || ! kill -0 "${RAY_CLUSTER_PIDS[$index]}" 2>/dev/null; then
            echo "ray_cluster: Ray did not start (log: $log):" >&2
            tail -n 20 "$log" >&2
            return 1
        fi
        sleep 0.5
    done
}

# Waits until N nodes are alive in the cluster, then prints one line per node.
ray_cluster_wait_nodes() {
    "${RAY_PYTHON:-python3}" - "$RAY_CLUSTER_ADDRESS" "$1" "${RAY_WAIT_S:-300}" <<'PY'
import sys, time

import ray

address, expected, wait_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ray.init(address=address, log_to_driver=False, logging_level="ERROR")
deadline = time.monotonic() + wait_s
while True:
    alive = [node for node in ray.nodes() if node["Alive"]]
    if len(alive) >= expected or time.monotonic() > deadline:
        break
    time.sleep(1)
for node in alive:
    res = node["Resources"]
    role = "head" if "node:__internal_head__" in res else "worker"
    print(f"ray_cluster: {role} {node['NodeID']} at {node['NodeManagerAddress']}: "
          f"{res.get('CPU', 0):g} CPUs, {res.get('GPU', 0):g} GPUs")
ray.shutdown()
if len(alive) < expected:
    sys.exit(f"ray_cluster: {len(alive)} of {expected} nodes joined within {wait_s:g} s")
print(f"ray_cluster: {len(alive)} nodes up at {address}")
PY
}

# Starts the head, then a worker on every other node; returns once all have joined (status 1 if not).
ray_cluster_start() {
    local -a nodes
    mapfile -t nodes < <(ray_cluster_nodes)
    ((${#nodes[@]} > 0)) || return 2
    RAY_LOG_DIR=${RAY_LOG_DIR:-${TMPDIR:-/tmp}/ray-cluster-${SLURM_JOB_ID:-$$}}
    mkdir -p "$RAY_LOG_DIR"
    ray_cluster_auth || return 1
    RAY_CLUSTER_HEAD_IP=$(ray_cluster_head_ip "${nodes[0]}") || return 1
    RAY_CLUSTER_ADDRESS="$RAY_CLUSTER_HEAD_IP:${RAY_PORT:-6379}"
    ray_cluster_launch 0 head "${nodes[0]}"
    ray_cluster_wait_started 0 "${RAY_CLUSTER_LOGS[0]}" || return 1
    local i
    for ((i = 1; i < ${#nodes[@]}; i++)); do
        ray_cluster_launch "$i" worker "${nodes[$i]}"
    done
    for ((i = 1; i < ${#nodes[@]}; i++)); do
        ray_cluster_wait_started "$i" "${RAY_CLUSTER_LOGS[$i]}" || return 1
    done
    ray_cluster_wait_nodes "${#nodes[@]}"
}

# Stops every node started here: SIGTERM to each (workers first, then the head), SIGKILL to any still running
# RAY_STOP_WAIT_S later.
ray_cluster_stop() {
    local -a pids=()
    local i pid
    for ((i = ${#RAY_CLUSTER_PIDS[@]} - 1; i >= 0; i--)); do
        pids+=("${RAY_CLUSTER_PIDS[$i]}")
    done
    ((${#pids[@]} > 0)) || return 0
    echo "ray_cluster: stopping ${#pids[@]} Ray nodes"
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    local deadline=$((SECONDS + ${RAY_STOP_WAIT_S:-30}))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "ray_cluster: process $pid did not stop within ${RAY_STOP_WAIT_S:-30} s; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    RAY_CLUSTER_PIDS=()
    RAY_CLUSTER_LOGS=()
}
