#!/usr/bin/env bash
# Stop the Ray of this cluster on this machine, and nothing else: the processes that serve the
# GCS on PORT (default 6379) or are connected to it (raylet, workers, dashboard, monitors,
# client server). Never `ray stop`: it stops every Ray of the machine.
#   bash ray_cluster/stop_own_ray.sh [PORT]
set -u
port="${1:-6379}"
pattern="--(gcs[-_]address|address)=[^ ]*:${port}( |\$)|--gcs_server_port=${port}( |\$)"
pkill -TERM -f -- "$pattern" || exit 0  # none running
for _ in $(seq 40); do
  pgrep -f -- "$pattern" >/dev/null || exit 0
  sleep 0.25
done
pkill -KILL -f -- "$pattern"
exit 0
