#!/usr/bin/env bash
# Start this cluster's Ray on this machine and record exactly the processes it started, so that
# stop_own_ray.sh stops those and nothing else (never `ray stop`, never a match on command lines):
#   bash ray_cluster/start_own_ray.sh PIDFILE [OPTIONS OF RAY START...]
# e.g. bash ray_cluster/start_own_ray.sh ~/.multigrain/ray.pids --head --port=6379 --dashboard-host=127.0.0.1
#
# - `ray start --block` runs in a session of its own (it outlives this script and the SSH session
#   that ran it) and is the parent of every Ray process of the node; once Ray is up, PIDFILE gets
#   one line "PID STARTTIME" for it and for each process under it (STARTTIME: field 22 of
#   /proc/PID/stat, so that a PID reused by an unrelated process later is never signalled).
# - Token authentication: RAY_AUTH_MODE=token for every Ray process and driver of the node.
# - No core dumps (ulimit -c 0): a Ray process's memory holds the cluster's token.
# - Ray's Prometheus endpoints (the dashboard agent's --metrics-export-port, the dashboard's and the
#   autoscaler's metrics servers) bind every interface whenever the node address is not a loopback
#   one, and Ray 2.60 has no option to change that; ray_site/sitecustomize.py binds them to
#   MULTIGRAIN_RAY_METRICS_HOST (127.0.0.1 here: scrape them on the node, or through an SSH tunnel).
# The output of `ray start` goes to PIDFILE.log.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: start_own_ray.sh PIDFILE [OPTIONS OF RAY START...]" >&2
  exit 2
fi
pidfile="$1"
shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$(dirname "$pidfile")"

if [ -s "$pidfile" ]; then
  read -r first_pid first_start < "$pidfile" || true
  if [ -n "${first_pid:-}" ] && [ -r "/proc/$first_pid/stat" ]; then
    stat="$(cat "/proc/$first_pid/stat" 2>/dev/null || true)"
    rest="${stat##*) }"
    read -r -a fields <<< "$rest"
    if [ "${fields[19]:-}" = "$first_start" ]; then
      echo "start_own_ray.sh: already running (pid $first_pid, $pidfile); stop it first with stop_own_ray.sh" >&2
      exit 1
    fi
  fi
fi

ulimit -c 0
export RAY_AUTH_MODE=token
export MULTIGRAIN_RAY_METRICS_HOST="${MULTIGRAIN_RAY_METRICS_HOST:-127.0.0.1}"
export PYTHONPATH="$here/ray_site${PYTHONPATH:+:$PYTHONPATH}"

log="$pidfile.log"
(umask 077 && : > "$log")
RAY_AUTH_MODE=token setsid nohup ray start --block "$@" > "$log" 2>&1 < /dev/null &
block=$!

# wait until Ray is up ("--block" prints this once every process has started)
for _ in $(seq 600); do
  if grep -q "This command will now block" "$log"; then
    break
  fi
  if ! kill -0 "$block" 2>/dev/null; then
    echo "start_own_ray.sh: Ray exited before it was up:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  sleep 0.2
done
if ! grep -q "This command will now block" "$log"; then
  echo "start_own_ray.sh: Ray did not start within 120 s (log: $log)" >&2
  exit 1
fi

# the block process and every process under it, each with its start time
# shellcheck source=proc_tree.sh
source "$(dirname "$0")/proc_tree.sh"
mapfile -t tree < <(descendants "$block")
tree=("$block" "${tree[@]}")
tmp="$pidfile.tmp"
(umask 077 && : > "$tmp")
for pid in "${tree[@]}"; do
  stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
  rest="${stat##*) }"
  read -r -a fields <<< "$rest"
  echo "$pid ${fields[19]}" >> "$tmp"
done
mv "$tmp" "$pidfile"
echo "start_own_ray.sh: Ray started ($(wc -l < "$pidfile") processes recorded in $pidfile, log $log)"
