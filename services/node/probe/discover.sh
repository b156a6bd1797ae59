# shellcheck shell=sh
# Unit discovery, for a node the config names no services of: the units that run vLLM. Sent only with a
# question that asks for it (DISCOVER=1); DISCOVER_PATTERN (an extended regex, in the environment) says what
# makes a unit or a process a vLLM server.

# discover_and_probe: the "discovered" section (the units found), then every section of each of them.
discover_and_probe() {
  discovered=$(discover_units)
  names=''; discovered_left=$discovered$NL
  while [ -n "$discovered_left" ]; do
    name=${discovered_left%%"$NL"*}; discovered_left=${discovered_left#*"$NL"}
    [ -z "$name" ] || names="$names $name"
  done
  section "discovered$names"
  discovered_left=$discovered$NL
  while [ -n "$discovered_left" ]; do
    name=${discovered_left%%"$NL"*}; discovered_left=${discovered_left#*"$NL"}
    [ -z "$name" ] || probe_unit "$name" '' '' ''
  done
}

# discover_units: the service units that look like vLLM servers, one a line: a vLLM-like ExecStart= or
# VLLM_* Environment=, "vllm" in the name, or a running vLLM process in the unit (by its cgroup, or as the
# unit's main process or one of its children, up to three levels: engine, server, wrapper).
discover_units() {
  units=$( { systemctl list-units --type=service --all --plain --no-legend --no-pager 2>/dev/null | awk '{ print $1 }'
             systemctl list-unit-files --type=service --no-legend --no-pager 2>/dev/null | awk '{ print $1 }'; } |
           grep -v '@\.service$' | sort -u)
  [ -n "$units" ] || return 0
  # Running vLLM processes, whatever launched them: vLLM's name, the VLLM:: titles it gives its engine and
  # workers, or a serve subcommand with vLLM-only flags. This probe's own processes (their argv holds the
  # marker's fixed part) are left out.
  hot_pids=$(head -c 4096 -- /dev/null /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | MARK_BASE=$MARK_BASE awk '
    /^==> \/proc\/[0-9]+\/cmdline <==$/ { split($2, path, "/"); pid = path[3]; next }
    pid == "" { next }
    index($0, ENVIRON["MARK_BASE"]) { ours[pid] = 1 }
    $0 ~ ENVIRON["DISCOVER_PATTERN"] { hit[pid] = 1 }
    END { for (pid in hit) if (!(pid in ours)) print pid }' | head -n 200)
  hot=''
  if [ -n "$hot_pids" ]; then
    set --; pids_left=$hot_pids$NL
    while [ -n "$pids_left" ]; do
      set -- "$@" "/proc/${pids_left%%"$NL"*}/cgroup"; pids_left=${pids_left#*"$NL"}
    done
    # A process's cgroup names its unit ("U=unit"). Its parents up to three levels are matched against the
    # units' main PIDs ("P=pid"; no systemd cgroups in the way), except for a login session's processes:
    # run by hand, they belong to no unit.
    hot=$( { grep -H '' -- "$@" 2>/dev/null | sed 's/^/C /'; printf '%s\n' "$hot_pids" | sed 's/^/H /'
             cat /proc/[0-9]*/stat 2>/dev/null | stat_rows | sed 's/^/S /'; } | awk '
      $1 == "S" { parent[$2] = $3; next }
      $1 == "H" { hot[$2] = 1; next }
      $1 == "C" { split($2, path, "/"); n = split($0, fields, ":"); k = split(fields[n], cgroup, "/")
                  if (cgroup[k] ~ /\.service$/) unit[path[3]] = cgroup[k]
                  if (cgroup[k] ~ /\.scope$/) scope[path[3]] = 1 }
      END { for (pid in hot) { if (pid in unit) print "U=" unit[pid]
                               if (pid in scope) continue
                               p = pid; for (i = 0; i < 4 && p > 1; i++) { print "P=" p; p = parent[p] } } }' | sort -u)
  fi
  set --; units_left=$units$NL
  while [ -n "$units_left" ]; do set -- "$@" "${units_left%%"$NL"*}"; units_left=${units_left#*"$NL"}; done
  # One paragraph per unit; properties come in D-Bus order (ExecStart before Id), so judge whole blocks.
  systemctl show -p Id,ExecStart,MainPID,Environment -- "$@" 2>/dev/null | HOT="$NL$hot$NL" awk 'BEGIN { RS = "" } {
    id = ""; main_pid = ""; hit = 0; n = split($0, lines, "\n")
    for (i = 1; i <= n; i++) {
      if (lines[i] ~ /^Id=/) id = substr(lines[i], 4)
      else if (lines[i] ~ /^MainPID=/) main_pid = substr(lines[i], 9)
      else if (lines[i] ~ /^ExecStart=/ && lines[i] ~ ENVIRON["DISCOVER_PATTERN"]) hit = 1
      else if (lines[i] ~ /^Environment=/ && lines[i] ~ /(=| |")VLLM_[A-Z0-9_]+=/) hit = 1
    }
    if (id ~ /vllm/) hit = 1
    if (id != "" && index(ENVIRON["HOT"], "\nU=" id "\n")) hit = 1
    if (main_pid != "" && main_pid != "0" && index(ENVIRON["HOT"], "\nP=" main_pid "\n")) hit = 1
    if (hit && id != "") print id }' | sort -u
}

# stat_rows: "pid ppid comm" of /proc/PID/stat lines on stdin (comm may hold spaces and parens: it ends at
# the last ") ").
stat_rows() {
  awk '{ open = index($0, " ("); close_at = 0
         while ((step = index(substr($0, close_at + 1), ") ")) > 0) close_at += step
         if (open < 2 || close_at <= open) next
         comm = substr($0, open + 2, close_at - open - 2); gsub(/[^A-Za-z0-9_.:@+-]/, "_", comm)
         split(substr($0, close_at + 2), field, " "); print substr($0, 1, open - 1), field[2], comm }'
}
