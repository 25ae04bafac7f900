#!/usr/bin/env bash
# MLflow's basic auth sends the user and password with every request, and the cluster's MLflow
# server speaks plain HTTP: it listens on the head's 127.0.0.1 only (start_mlflow.sh), and every
# client reaches it through an SSH tunnel, which encrypts the way there. On the client,
# http://127.0.0.1:PORT is the head's MLflow.
#
#   bash ray_cluster/mlflow_tunnel.sh [-i KEY] [USER@]HEAD [PORT]
#       the laptop: a tunnel in the foreground (Ctrl-C closes it); PORT default 5000
#   bash ray_cluster/mlflow_tunnel.sh --background PIDFILE [-i KEY] [USER@]HEAD [PORT]
#       a node (worker_start_ray_commands): the tunnel in a session of its own, reopened when the
#       connection drops; its PID and start time in PIDFILE (nothing done when that one runs)
#   bash ray_cluster/mlflow_tunnel.sh --authorize PUBKEY [PORT]
#       the head (head_setup_commands): let PUBKEY, the nodes' tunnel key, log in to forward to
#       127.0.0.1:PORT and do nothing else (no shell, no command, no other forwarding)
# The tunnel listens on 127.0.0.1 of the client only (never on its other interfaces).
set -euo pipefail
usage() {
  echo "usage: mlflow_tunnel.sh [--background PIDFILE] [-i KEY] [USER@]HEAD [PORT]" >&2
  echo "       mlflow_tunnel.sh --authorize PUBKEY [PORT]" >&2
  exit 2
}
[ $# -ge 1 ] || usage

if [ "$1" = "--authorize" ]; then
  [ $# -ge 2 ] || usage
  key="$(cat "$2")"
  port="${3:-5000}"
  line="restrict,port-forwarding,permitopen=\"127.0.0.1:$port\",command=\"/bin/false\" $key"
  mkdir -p "$HOME/.ssh"
  chmod 700 "$HOME/.ssh"
  touch "$HOME/.ssh/authorized_keys"
  chmod 600 "$HOME/.ssh/authorized_keys"
  grep -qxF -- "$line" "$HOME/.ssh/authorized_keys" || echo "$line" >> "$HOME/.ssh/authorized_keys"
  exit 0
fi

pidfile=""
if [ "$1" = "--background" ]; then
  [ $# -ge 2 ] || usage
  pidfile="$2"
  shift 2
fi
key_args=()
if [ "${1:-}" = "-i" ]; then
  [ $# -ge 2 ] || usage
  key_args=(-i "$2")
  shift 2
fi
[ $# -ge 1 ] || usage
head="$1"
port="${2:-5000}"
case "$port" in ''|*[!0-9]*) usage ;; esac
ssh_args=(-N -o ExitOnForwardFailure=yes -o ServerAliveInterval=30 -o ServerAliveCountMax=3
          -L "127.0.0.1:$port:127.0.0.1:$port" "${key_args[@]}")

if [ -z "$pidfile" ]; then
  echo "mlflow_tunnel.sh: http://127.0.0.1:$port is MLflow on $head (Ctrl-C closes the tunnel)" >&2
  exec ssh "${ssh_args[@]}" "$head"
fi

start_time() {  # field 22 of /proc/PID/stat, empty when PID is gone
  local stat rest fields
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  rest="${stat##*) }"
  read -r -a fields <<< "$rest"
  echo "${fields[19]}"
}
if [ -s "$pidfile" ]; then
  read -r pid start < "$pidfile" || true
  if [ -n "${pid:-}" ] && [ "$(start_time "$pid")" = "${start:-}" ]; then
    exit 0  # already open
  fi
fi
mkdir -p "$(dirname "$pidfile")"
# a node has no one to answer questions: no password prompt, the head's host key learnt on first use
ssh_args+=(-o BatchMode=yes -o StrictHostKeyChecking=accept-new)
setsid nohup bash -c 'while true; do ssh "$@"; sleep 5; done' mlflow-tunnel "${ssh_args[@]}" "$head" \
  > "$pidfile.log" 2>&1 < /dev/null &
pid=$!
echo "$pid $(start_time "$pid")" > "$pidfile"
echo "mlflow_tunnel.sh: http://127.0.0.1:$port is MLflow on $head (pid $pid, $pidfile)"
