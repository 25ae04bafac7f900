# Sourced by start_own_ray.sh and stop_own_ray.sh: process facts read from /proc.

start_time() {  # field 22 of /proc/PID/stat; empty when PID is gone or a zombie
  local stat rest fields
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  rest="${stat##*) }"
  read -r -a fields <<< "$rest"
  [ "${fields[0]}" = "Z" ] || echo "${fields[19]}"
}

descendants() {  # every process under the PIDs given (not those PIDs), one PID per line
  declare -A parent_of=()
  local stat_file stat pid rest fields known added
  for stat_file in /proc/[0-9]*/stat; do
    stat="$(cat "$stat_file" 2>/dev/null)" || continue
    pid="${stat%% *}"
    rest="${stat##*) }"
    read -r -a fields <<< "$rest"
    parent_of[$pid]="${fields[1]}"
  done
  local -a tree=("$@")
  added=1
  while [ "$added" = 1 ]; do
    added=0
    for pid in "${!parent_of[@]}"; do
      for known in "${tree[@]}"; do
        if [ "${parent_of[$pid]}" = "$known" ] && [[ " ${tree[*]} " != *" $pid "* ]]; then
          tree+=("$pid")
          added=1
        fi
      done
    done
  done
  [ "${#tree[@]}" -gt "$#" ] && printf '%s\n' "${tree[@]:$#}"
  return 0
}
