#!/usr/bin/env bash
# Stop the Ray that start_own_ray.sh started on this machine, and nothing else: the processes
# recorded in PIDFILE ("PID STARTTIME" per line, the `ray start --block` process first) that still
# run with the same start time, and the processes they started since (workers, found through their
# parent PIDs now). No `ray stop` (it stops every Ray of the machine), no match on command lines
# (an unrelated process naming the same port would match). No PIDFILE: nothing to stop.
#   bash ray_cluster/stop_own_ray.sh PIDFILE
set -u
if [ $# -ne 1 ]; then
  echo "usage: stop_own_ray.sh PIDFILE" >&2
  exit 2
fi
pidfile="$1"
[ -s "$pidfile" ] || exit 0

# shellcheck source=proc_tree.sh
source "$(dirname "$0")/proc_tree.sh"

# what still runs of what was recorded, then what those started since, each as "PID STARTTIME"
declare -a ours=()
while read -r pid start _; do
  case "$pid" in ''|*[!0-9]*) continue ;; esac
  if [ -n "$start" ] && [ "$(start_time "$pid")" = "$start" ]; then
    ours+=("$pid $start")
  fi
done < "$pidfile"
declare -a recorded=()
for entry in "${ours[@]}"; do recorded+=("${entry%% *}"); done
if [ "${#recorded[@]}" -gt 0 ]; then
  while read -r pid; do
    start="$(start_time "$pid")"
    [ -n "$start" ] && ours+=("$pid $start")
  done < <(descendants "${recorded[@]}")
fi

signal_ours() {  # signal each of ours that still runs with its recorded start time
  local entry pid start
  for entry in "${ours[@]}"; do
    pid="${entry%% *}"
    start="${entry#* }"
    if [ "$(start_time "$pid")" = "$start" ]; then
      kill "-$1" "$pid" 2>/dev/null
    fi
  done
}
running() {
  local entry
  for entry in "${ours[@]}"; do
    [ "$(start_time "${entry%% *}")" = "${entry#* }" ] && return 0
  done
  return 1
}

if [ "${#ours[@]}" -gt 0 ]; then
  # `ray start --block` (the first line) stops the processes it started on SIGTERM; then the rest
  first="${ours[0]%% *}"
  if [ "$(head -n 1 "$pidfile" | cut -d' ' -f1)" = "$first" ]; then
    kill -TERM "$first" 2>/dev/null
    for _ in $(seq 40); do
      running || break
      sleep 0.25
    done
  fi
  if running; then
    signal_ours TERM
    for _ in $(seq 20); do
      running || break
      sleep 0.25
    done
  fi
  running && signal_ours KILL
fi
rm -f "$pidfile"
exit 0
