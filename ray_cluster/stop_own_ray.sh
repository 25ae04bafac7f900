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

start_time() {  # field 22 of /proc/PID/stat; empty when PID is gone or a zombie
  local stat rest fields
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  rest="${stat##*) }"
  read -r -a fields <<< "$rest"
  [ "${fields[0]}" = "Z" ] || echo "${fields[19]}"
}

# what still runs of what was recorded, then what those started since, each as "PID STARTTIME"
declare -a ours=()
while read -r pid start _; do
  case "$pid" in ''|*[!0-9]*) continue ;; esac
  if [ -n "$start" ] && [ "$(start_time "$pid")" = "$start" ]; then
    ours+=("$pid $start")
  fi
done < "$pidfile"
declare -A parent_of=()
for stat_file in /proc/[0-9]*/stat; do
  stat="$(cat "$stat_file" 2>/dev/null)" || continue
  pid="${stat%% *}"
  rest="${stat##*) }"
  read -r -a fields <<< "$rest"
  parent_of[$pid]="${fields[1]}"
done
added=1
while [ "$added" = 1 ]; do
  added=0
  for pid in "${!parent_of[@]}"; do
    for entry in "${ours[@]}"; do
      if [ "${parent_of[$pid]}" = "${entry%% *}" ] && [[ " ${ours[*]} " != *" $pid "* ]]; then
        start="$(start_time "$pid")"
        if [ -n "$start" ]; then
          ours+=("$pid $start")
          added=1
        fi
      fi
    done
  done
done

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
