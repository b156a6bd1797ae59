# shellcheck shell=sh
# A unit's processes: which one is the vLLM server when the main process is a wrapper that does not exec
# (sudo -u, uv run, conda run, a shell or a Python launcher). Their rows come from processes.awk.

# first_words: the first four words of $command_line (one word a line) in word1 … word4.
first_words() {
  words_left=$command_line$NL
  word1=${words_left%%"$NL"*}; words_left=${words_left#*"$NL"}
  word2=${words_left%%"$NL"*}; words_left=${words_left#*"$NL"}
  word3=${words_left%%"$NL"*}; words_left=${words_left#*"$NL"}
  word4=${words_left%%"$NL"*}
}

# is_python PATH: is PATH a Python interpreter (python, python3, python3.12, …)?
is_python() {
  program=${1##*/}
  case $program in
    python*) program=${program#python}; case $program in *[!0-9.]*) return 1;; esac; return 0;;
  esac
  return 1
}

# is_vllm_command: is $command_line vLLM itself (`vllm serve`, its console script run by an interpreter,
# the api_server module)? Then the unit's other processes are its engine and workers, whose argv tells
# nothing.
is_vllm_command() {
  first_words; vllm_at=0; python_at=0
  case $word1 in vllm|*/vllm) vllm_at=1;; esac
  case $word2 in vllm|*/vllm) vllm_at=2;; esac
  if [ $vllm_at = 1 ] && [ "$word2" = serve ]; then return 0; fi
  if [ $vllm_at = 2 ] && [ "$word3" = serve ]; then return 0; fi
  if is_python "$word1"; then python_at=1; fi
  if is_python "$word2"; then python_at=2; fi
  if [ $python_at = 1 ] && [ "$word2" = -m ] && [ "$word3" = vllm.entrypoints.openai.api_server ]; then return 0; fi
  if [ $python_at = 2 ] && [ "$word3" = -m ] && [ "$word4" = vllm.entrypoints.openai.api_server ]; then return 0; fi
  return 1
}

# unit_processes MAIN_PID CGROUP [COMMAND_LINE]: the "procs" section: the unit's processes and where they
# were found (its cgroup's cgroup.procs, else "ppid": the main process's descendants), at most MAX_PROCS.
# Then, unless the main process is vLLM itself, the "argvs" section: the other processes' argv in one
# read, head's "==> FILE <==" headers between them (/dev/null first, so that there is a header even for
# one file), and the environment of the first of them that looks like a server (a wrapper that forks,
# such as sudo, may hand its child another one). COMMAND_LINE: the main one, when already read.
# Sets server_pid (empty: none found) and command_line.
unit_processes() {
  root_pid=$1; cgroup=$2; server_pid=''; rows=''
  if [ $# -ge 3 ]; then command_line=$3; else command_line=$(tr '\0' '\n' < "/proc/$root_pid/cmdline" 2>/dev/null); fi
  # Only an absolute cgroup path that does not climb out is followed.
  case $cgroup in /*..*|'') cgroup='';; /*) ;; *) cgroup='';; esac
  if [ -n "$cgroup" ] && { [ -r "$CGROUP_ROOT$cgroup/cgroup.procs" ] || [ -r "$CGROUP_ROOT/systemd$cgroup/cgroup.procs" ] ||
                           [ -r "$CGROUP_ROOT/unified$cgroup/cgroup.procs" ]; }; then
    rows=$(GPU_APPS=$gpu_ancestry_pending UNIT_CGROUP=$cgroup CGROUP_ROOT=$CGROUP_ROOT \
           awk -v mode=cgroup -v max="$MAX_PROCS" "$PROCESSES_AWK")
    gpu_ancestry_pending=''
  fi
  if [ -z "$rows" ] && [ -r "/proc/$root_pid/task/$root_pid/children" ]; then
    # The descendants' parent/child pairs, a whole level at a time, until MAX_PROCS are known.
    edges=''; level=$root_pid; known=0
    while [ -n "$level" ] && [ "$known" -lt "$MAX_PROCS" ]; do
      next_level=''
      # shellcheck disable=SC2086 # lists of PIDs, split on purpose
      for parent in $level; do
        for children_file in /proc/"$parent"/task/*/children; do
          children=''; read -r children 2>/dev/null <"$children_file"
          for child in $children; do edges="$edges$parent $child$NL"; next_level="$next_level $child"; known=$((known + 1)); done
        done
      done
      level=$next_level
    done
    rows=$(GPU_APPS=$gpu_ancestry_pending CHILD_EDGES=$edges \
           awk -v mode=children -v root="$root_pid" -v max="$MAX_PROCS" "$PROCESSES_AWK")
    gpu_ancestry_pending=''
  elif [ -z "$rows" ]; then
    rows=$(GPU_APPS=$gpu_ancestry_pending awk -v mode=scan -v root="$root_pid" -v max="$MAX_PROCS" "$PROCESSES_AWK" /proc/[0-9]*)
    gpu_ancestry_pending=''
  fi
  found_in=${rows%%"$NL"*}
  case $rows in *"$NL"*) rows=${rows#*"$NL"};; *) rows='';; esac
  section "procs src=$found_in"; printf '%s\n' "$rows"
  is_vllm_command && return 0
  set --; rows_left=$rows$NL
  while [ -n "$rows_left" ]; do
    row_pid=${rows_left%%"$NL"*}; rows_left=${rows_left#*"$NL"}; row_pid=${row_pid%% *}
    [ -z "$row_pid" ] || [ "$row_pid" = "$root_pid" ] || set -- "$@" "/proc/$row_pid/cmdline"
  done
  [ $# -gt 0 ] || return 0
  section argvs; head -c "$MAX_ARGV_BYTES" -- /dev/null "$@" 2>/dev/null
  server_pid=$(head -c "$MAX_ARGV_BYTES" -- /dev/null "$@" 2>/dev/null | tr '\0' ' ' | awk '
    /^==> \/proc\/[0-9]+\/cmdline <==$/ { split($2, path, "/"); pid = path[3]; next }
    pid != "" && !/^VLLM::/ && (/ serve / || /vllm\.entrypoints/) { print pid; exit }')
  [ -z "$server_pid" ] || read_file "/proc/$server_pid/environ" cenviron
  return 0
}
