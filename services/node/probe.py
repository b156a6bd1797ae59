"""The node probe: one fixed POSIX-sh script per question per node, and the parser of what it prints.

The script is assembled from fixed text plus values that the config validated (unit names, URLs,
paths) and integers chosen by handlers, each passed through ``shlex.quote``. No text from a chat
message ever reaches it.

What it prints (the wire format): sections, each opened by a marker line ``\n@@inferbot@@<N> <name> <k=v…>\n``
where ``<N>`` is a random value the node reads when the probe starts and never puts on a command line: no
byte on the node can forge a marker, so contents need no escaping. First come, as they are, the sections
that are always UTF-8 (the node line, ``systemctl show``, ``nvidia-smi``, the GPU processes' ancestry);
then one line ``@@inferbot@@ b64 <base64>`` (one ``base64`` process) holding every section whose bytes may be
anything (files, argv with their NULs, the journal, HTTP bodies); then a plain ``@@inferbot@@ end``. Each
stream names the unit its sections belong to. A section whose exit status is known only after its content
streamed is followed by an ``rc <status>`` marker. HTTP bodies fetched by one curl for several URLs are cut
by the byte counts curl writes after each (``-w``), from the end.
"""

from __future__ import annotations

import base64
import functools
import re
import shlex
from datetime import UTC, datetime

from pydantic import ConfigDict, Field, model_validator

from config.models import API_URL_RE, PATH_RE, UNIT_RE
from services.models import HttpProbe, Model

MARK = "@@inferbot@@"
SHOW_PROPERTIES = (
    "Id,Description,LoadState,ActiveState,SubState,Result,MainPID,ExecMainStartTimestamp,"
    "ActiveEnterTimestamp,StateChangeTimestamp,InactiveEnterTimestamp,NRestarts,NeedDaemonReload,"
    "FragmentPath,DropInPaths,Environment,EnvironmentFiles,ExecStart,ExecMainStatus,InvocationID,ControlGroup"
)
# The unit's other processes (a wrapper's child may be the vLLM server): at most this many, and this many
# bytes of each one's argv.
MAX_PROCS = 64
MAX_ARGV_BYTES = 16384
# The journal lines the parsers read (services/parse/vllm_log.py): phase markers, shard progress, the stats
# line, the version banner and failure markers. The node scans the current start's journal and sends
# only these, so a busy server's access-log lines neither cost transfer and parsing nor push the phase
# markers out of the window.
JOURNAL_FILTER = "|".join((
    r"Completed \|", "Loading (safetensors|pt|np_cache|weights)", "Multi-thread loading", "Starting to load model",
    "Filesystem type for checkpoints", "Model loading took", "KV cache", "Memory profiling", "init engine",
    "Dynamo bytecode", r"torch\.compile", "CUDA graphs", "Compiling a graph", "Graph capturing", "Starting vLLM",
    "Available routes", "Started server process", "application startup", "Application startup", "HTTP server",
    "Waiting for GPU memory", "throughput: ", "version", "Error", "error:", "Traceback", "OutOfMemory",
    "out of memory", "Timed out", "Main process exited", "unrecognized arguments", "Failed", "failed",
))
JOURNAL_SCAN = 3000  # lines of the current start looked at on the node
ARGS_SCAN = 400  # first lines of a start searched for vLLM's "non-default args" line
# What makes a unit or a process a vLLM server for discovery (an extended regex, matched by awk).
DISCOVER_PATTERN = (
    r"vllm|VLLM::|[ =/]serve .*(--(tensor-parallel-size|max-model-len|gpu-memory-utilization|served-model-name|"
    r"kv-cache-dtype|enable-prefix-caching|max-num-seqs|tool-call-parser|reasoning-parser)|-tp [0-9])"
)
# With ProbeOptions.metrics_filter the node sends only the /metrics lines the watcher samples for charts
# (token counters, request and KV-cache gauges) and the status code line: a server's histograms are most
# of the body, and the watcher scrapes every service every interval. (An awk ERE: no {n}, which mawk
# before 1.3.4-20200717 reads literally.)
METRICS_FILTER = (
    r"^(vllm:(prompt_tokens_total|generation_tokens_total|num_requests_running|num_requests_waiting|"
    r"kv_cache_usage_perc|gpu_cache_usage_perc)[{ ]|[0-9][0-9][0-9]$)"
)
BENCH_KEYS = (
    "date|max_concurrency|output_throughput|request_rate|model_id|completed|num_prompts|mean_tpot_ms|"
    "median_ttft_ms|p99_ttft_ms|max_output_tokens_per_s|backend|label"
)
# The summary values read from each benchmark result file (what ``grep -oE`` printed before; awk's match()).
BENCH_RE = '"(' + BENCH_KEYS + ')": ?("[^"]*"|[-0-9.eE+]+|null)'
WRAP = MARK + " b64 "  # the line that carries the base64 of every section


class ProbeTarget(Model):
    """One unit to look at; every field comes from the validated config."""

    # Frozen (hashable): the remote command is built once per distinct set of targets (``probe_command``).
    model_config = ConfigDict(extra="forbid", frozen=True)
    unit: str
    api_url: str | None = None
    log_file: str | None = None
    bench_dir: str | None = None
    models: bool = False  # list /v1/models with the API key the bot sends on stdin (never on a command line)


class ProbeOptions(Model):
    """What a question needs from the node; numbers only, chosen by handlers."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # hashable, like ProbeTarget
    gpus: bool = True
    journal_lines: int = Field(default=300, ge=0, le=5000)  # the newest lines that match JOURNAL_FILTER
    metrics_samples: int = Field(default=0, ge=0, le=2)
    metrics_interval_s: float = Field(default=1.0, ge=0.1, le=10.0)
    log_lines: int = Field(default=0, ge=0, le=200)
    bench: bool = False
    http_timeout_s: float = Field(default=3.0, ge=0.5, le=30.0)
    discover: bool = False
    models: bool = False  # ask /v1/models for services whose API key the bot holds
    metrics_filter: bool = False  # only the /metrics lines of METRICS_FILTER (the watcher's samples)
    # What settings are made of: the unit file (systemctl cat), the files it and the command read, the main
    # process's argv and environment, the unit's other processes. The watcher needs none of it.
    settings: bool = True
    api_info: bool = True  # /version and /v1/models of a server whose /health answered
    # Asked again and again (the watcher, every interval): a pool that keeps sessions (the scheduler's leader)
    # runs it on one long-lived channel, answered once per newline (build_script's ``session``), instead of
    # sending the script on a new channel each time. What the node answers is the same.
    persistent: bool = False

    @model_validator(mode="after")
    def _session_reads_no_key(self) -> ProbeOptions:
        if self.persistent and self.api_info:
            raise ValueError("a persistent probe cannot ask /v1/models: its stdin is the trigger, not the API key")
        return self


_HELPERS = r"""
set -u
export LC_ALL=C SYSTEMD_COLORS=0 SYSTEMD_PAGER= PAGER=cat
NL='
'
CGR=/sys/fs/cgroup
MB='@@inferbot@@'
# Every section marker carries a random value read here (nn), again for each answer of a persistent session.
# It is never on a command line (argv is world-readable in /proc; a process's environment and memory are
# not; awk reads it from its environment), so no byte on the node (a journal line, a file, an HTTP body, a
# process title) can forge a marker.
nn() {
  N=''
  read -r N 2>/dev/null </proc/sys/kernel/random/uuid
  N=${N%-*-*}  # 60 random bits are plenty (one guess per answer, no feedback); each marker carries them
  [ -n "$N" ] || N=$(od -An -N8 -tx1 /dev/urandom 2>/dev/null | tr -d ' \n')
  M="$MB$N"
  export M
}
nn
# The effective uid from the shell's own status file (no process for `id -u`).
U=''
while read -r k _ e _; do case $k in Uid:) U=$e; break;; esac; done 2>/dev/null </proc/self/status
[ -n "$U" ] || U=$(id -u)
if [ "$U" = 0 ]; then S=''; else S='sudo -n'; fi
# A section marker, on its own line: the writer always ends what came before with a newline of its own.
# sec: into the base64 (contents that may be any bytes); psec: on fd 3, sent as it is (systemd's and
# nvidia-smi's own text, numbers: UTF-8 whatever the node holds, a third smaller than in base64).
sec() { printf '\n%s %s\n' "$M" "$1"; }
psec() { printf '\n%s %s\n' "$M" "$1" >&3; }
# A file's bytes as they are. Files the login user cannot read (another user's /proc/PID/environ, 0600 env
# files) go through sudo -n, which never prompts (without a sudoers rule it fails and the bot says it fell
# back to the unit), with the base64 command the README's sudoers line names: such a section says b64=1.
rd() {
  if [ -r "$1" ]; then sec "$2 path=$1"; cat -- "$1" 2>/dev/null
  else sec "$2 b64=1 path=$1"; $S base64 -w0 -- "$1" 2>/dev/null; fi
  sec "rc $?"
}
# The newest 60 benchmark result files of BD (BL: ls -t), each one's summary values (BR): one awk.
bawk='
  function bench(   n, f, j, s, re) {
    printf "\n%s bench dir=%s\n", ENVIRON["M"], ENVIRON["BD"]
    n = split(ENVIRON["BL"], f, "\n"); re = ENVIRON["BR"]
    for (j = 1; j <= n && j <= 60; j++) {
      printf "\n%s benchfile path=%s\n", ENVIRON["M"], f[j]
      while ((getline s < f[j]) > 0)
        while (match(s, re)) { print substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH) }
      close(f[j]) } }'
# The journal lines the parsers read (JF), in one awk: of the repetitive lines (shard progress, periodic
# stats) only the newest 3, every other marker in order (the phase read from the last marker stays
# right), then the newest JL. First line out: "A" and vLLM's last "non-default args" line, or "E" when
# the journal said nothing or only "-- No entries --" (what a user outside systemd-journal sees, rc 0).
# The benchmark files (BD, BL) ride along when asked: their sections follow. (awk -v jl="$JL" "$jawk")
jawk=$bawk'
    $0 != "" { if (++nn == 1 && NR == 1 && $0 == "-- No entries --") ne = 1 }
    index($0, "non-default args: ") { a = $0 }
    $0 ~ ENVIRON["JF"] { l[++n] = $0; if (index($0, "Completed |")) np++; else if (index($0, "throughput: ")) ns++ }
    END { if (nn == 0 || (nn == 1 && ne)) print "E"
          else {
            print "A" a; p = 0; s = 0; k = 0
            for (i = 1; i <= n; i++) { x = l[i]
              if (index(x, "Completed |")) { if (++p <= np - 3) continue }
              else if (index(x, "throughput: ")) { if (++s <= ns - 3) continue }
              o[++k] = x }
            for (i = (k > jl ? k - jl + 1 : 1); i <= k; i++) print o[i] }
          if (ENVIRON["BD"] != "") bench() }'
# vLLM's "non-default args" line among the first AS lines of a start.
va() { awk -v n="$AS" 'NR > n { exit } index($0, "non-default args: ") { a = $0 } END { if (a != "") print a }'; }
# "pid ppid comm" from /proc/PID/stat lines (comm may hold spaces and parens: cut at the last ") ").
statrows() {
  awk '{ i = index($0, " ("); k = 0
         while ((t = index(substr($0, k + 1), ") ")) > 0) k += t
         if (i < 2 || k <= i) next
         comm = substr($0, i + 2, k - i - 2); gsub(/[^A-Za-z0-9_.:@+-]/, "_", comm)
         split(substr($0, k + 2), f, " "); print substr($0, 1, i - 1), f[2], comm }'
}
# The first four words of $cl (a command line, one word a line).
w4() {
  r=$cl$NL; w1=${r%%"$NL"*}; r=${r#*"$NL"}; w2=${r%%"$NL"*}; r=${r#*"$NL"}; w3=${r%%"$NL"*}; r=${r#*"$NL"}
  w4=${r%%"$NL"*}
}
ispy() {
  b=${1##*/}; case $b in python*) b=${b#python}; case $b in *[!0-9.]*) return 1;; esac; return 0;; esac; return 1
}
# Is $cl vLLM itself (`vllm serve`, its console script, the api_server module)? Then the unit's other
# processes are its engine and workers, whose argv tells nothing.
isv() {
  w4; v=0; py=0
  case $w1 in vllm|*/vllm) v=1;; esac
  case $w2 in vllm|*/vllm) v=2;; esac
  if [ $v = 1 ] && [ "$w2" = serve ]; then return 0; fi
  if [ $v = 2 ] && [ "$w3" = serve ]; then return 0; fi
  if ispy "$w1"; then py=1; fi
  if ispy "$w2"; then py=2; fi
  if [ $py = 1 ] && [ "$w2" = -m ] && [ "$w3" = vllm.entrypoints.openai.api_server ]; then return 0; fi
  if [ $py = 2 ] && [ "$w3" = -m ] && [ "$w4" = vllm.entrypoints.openai.api_server ]; then return 0; fi
  return 1
}
# The unit's processes: its cgroup (v2; v1's systemd hierarchy; hybrid's unified one: the first readable,
# non-empty cgroup.procs, its PN lowest PIDs), else the main process's descendants, breadth first (each
# one's children in PID text order), up to PN of them. Those are found from /proc/PID/task/*/children
# (whole levels, until PN are known), or, where the kernel has no such files, from every /proc/PID/stat.
# One awk turns them into "pid ppid comm" rows (getline: a process gone meanwhile is skipped). Then,
# unless the main process is vLLM itself, their argv in one read: head's "==> FILE <==" headers delimit
# them (/dev/null first, so there is a header even for one file). $3: the main command line, when known.
pawk='
  function row(s,   i, k, t, comm, f) {
    i = index(s, " ("); k = 0
    while ((t = index(substr(s, k + 1), ") ")) > 0) k += t
    if (i < 2 || k <= i) return ""
    comm = substr(s, i + 2, k - i - 2); gsub(/[^A-Za-z0-9_.:@+-]/, "_", comm)
    split(substr(s, k + 2), f, " "); return substr(s, 1, i - 1) " " f[2] " " comm }
  function stat(x,   f, s, r) {
    f = "/proc/" x "/stat"; r = ""; if ((getline s < f) > 0) r = row(s); close(f); return r }
  BEGIN {
    if (ENVIRON["PSA"] != "") {
      # The node section "ps" (once, with the first unit): "pid ppid" of each GPU process (nvidia-smi rows
      # in PSA) and of its ancestors, all that tells its service from a leftover; on the plain stream.
      o = "/dev/fd/3"; printf "\n%s ps\n", ENVIRON["M"] > o
      n = split(ENVIRON["PSA"], l, "\n")
      for (j = 1; j <= n; j++) {
        x = l[j]; sub(/,.*/, "", x)
        while (x ~ /^[0-9]+$/ && x + 0 > 0 && !(x in seen) && (r = stat(x)) != "") {
          seen[x] = 1; split(r, w, " "); print x, w[2] > o; x = w[2] }
      }
      close(o)
    }
    if (mode == "a") exit
    if (mode == "c") {
      cg = ENVIRON["CG"]; c[1] = ENVIRON["CR"] cg "/cgroup.procs"; c[2] = ENVIRON["CR"] "/systemd" cg "/cgroup.procs"
      c[3] = ENVIRON["CR"] "/unified" cg "/cgroup.procs"
      for (j = 1; j <= 3; j++) {
        k = 0
        while ((getline x < c[j]) > 0) {
          if (x !~ /^[0-9]+$/) continue
          v = x + 0
          if (k < max || v < a[k]) {
            if (k < max) k++
            i = k; while (i > 1 && a[i - 1] > v) { a[i] = a[i - 1]; i-- } a[i] = v }
        }
        close(c[j])
        if (k > 0) { print c[j]; for (i = 1; i <= k; i++) if ((r = stat(a[i])) != "") print r; exit }
      }
      exit
    }
    print "ppid"
    if (mode == "k") {
      m = split(ENVIRON["E"], L, "\n")
      for (j = 1; j <= m; j++) if (split(L[j], w, " ") == 2) kids[w[1]] = kids[w[1]] " " w[2]
      for (x in kids) {
        m = split(kids[x], ch, " ")
        for (i = 2; i <= m; i++) {
          v = ch[i]; j = i; while (j > 1 && (ch[j - 1] "") > (v "")) { ch[j] = ch[j - 1]; j-- } ch[j] = v }
        kids[x] = ""; for (i = 1; i <= m; i++) kids[x] = kids[x] " " ch[i]
      }
    } else {
      # The parent of every process (after the last ") " of its stat line: state, ppid).
      for (j = 1; j < ARGC; j++) {
        f = ARGV[j] "/stat"
        if ((getline s < f) > 0 && match(s, /.*\) /) && (i = index(s, " (")) > 1) {
          split(substr(s, RLENGTH + 1, 40), w, " "); x = substr(s, 1, i - 1); st[x] = s; kids[w[2]] = kids[w[2]] " " x }
        close(f)
      }
    }
    q[1] = root; h = 1; t = 1; n = 0
    while (h <= t && n < max) {
      x = q[h++]
      if (mode == "k") r = stat(x); else r = (x in st) ? row(st[x]) : ""
      if (r != "") { print r; n++ }
      m = split(kids[x], ch, " "); for (i = 1; i <= m; i++) q[++t] = ch[i] }
    exit }'
procs() {
  p=$1; cg=$2; srv=''; rows=''
  if [ $# -ge 3 ]; then cl=$3; else cl=$(tr '\0' '\n' < "/proc/$p/cmdline" 2>/dev/null); fi
  case $cg in /*..*|'') cg='';; /*) ;; *) cg='';; esac
  if [ -n "$cg" ] && { [ -r "$CGR$cg/cgroup.procs" ] || [ -r "$CGR/systemd$cg/cgroup.procs" ] ||
                       [ -r "$CGR/unified$cg/cgroup.procs" ]; }; then
    rows=$(PSA=${PSA-} CG=$cg CR=$CGR awk -v mode=c -v max="$PN" "$pawk"); PSA=''
  fi
  if [ -z "$rows" ] && [ -r "/proc/$p/task/$p/children" ]; then
    ed=''; q=$p; nd=0
    while [ -n "$q" ] && [ "$nd" -lt "$PN" ]; do
      nq=''
      for x in $q; do
        for f in /proc/"$x"/task/*/children; do
          c=''; read -r c 2>/dev/null <"$f"
          for y in $c; do ed="$ed$x $y$NL"; nq="$nq $y"; nd=$((nd + 1)); done
        done
      done
      q=$nq
    done
    rows=$(PSA=${PSA-} E=$ed awk -v mode=k -v root="$p" -v max="$PN" "$pawk"); PSA=''
  elif [ -z "$rows" ]; then
    rows=$(PSA=${PSA-} awk -v mode=s -v root="$p" -v max="$PN" "$pawk" /proc/[0-9]*); PSA=''
  fi
  psrc=${rows%%"$NL"*}
  case $rows in *"$NL"*) rows=${rows#*"$NL"};; *) rows='';; esac
  sec "procs src=$psrc"; printf '%s\n' "$rows"
  isv && return 0
  set --; r=$rows$NL
  while [ -n "$r" ]; do
    q=${r%%"$NL"*}; r=${r#*"$NL"}; q=${q%% *}
    [ -z "$q" ] || [ "$q" = "$p" ] || set -- "$@" "/proc/$q/cmdline"
  done
  [ $# -gt 0 ] || return 0
  sec argvs; head -c "$CB" -- /dev/null "$@" 2>/dev/null
  # The environment of the first other process that looks like a server (a wrapper that forks, such as
  # sudo, may have handed its child a different one).
  sv=$(head -c "$CB" -- /dev/null "$@" 2>/dev/null | tr '\0' ' ' | awk '
    /^==> \/proc\/[0-9]+\/cmdline <==$/ { split($2, a, "/"); cur = a[3]; next }
    cur != "" && !/^VLLM::/ && (/ serve / || /vllm\.entrypoints/) { print cur; exit }')
  [ -n "$sv" ] && rd "/proc/$sv/environ" cenviron
  srv=$sv
  return 0
}
# ap WORD: the --config/--env-file arguments of a command, a word at a time ($pw: the previous word).
ap() {
  w=$1
  case $pw in --config|--env-file) af="$af$w$NL";; esac
  case $w in --env-file=*) w=${w#--env-file=}; af="$af$w$NL";; esac
  pw=$w
}
# du CMD [PORT]: the URL a vLLM command line (one word a line) listens on: --port/--host, docker's -p,
# else the port vLLM logged, else 8000; 0.0.0.0 and :: are reached on 127.0.0.1.
du() {
  port='' host='' pub=$NL pw='' r=$1$NL
  while [ -n "$r" ]; do
    w=${r%%"$NL"*}; r=${r#*"$NL"}
    case $pw in --port) port=$w;; esac
    case $w in --port=*) w=${w#--port=}; port=$w;; esac
    case $pw in --host) host=$w;; esac
    case $w in --host=*) w=${w#--host=}; host=$w;; esac
    case $pw in -p|--publish) case $w in *:*) x=${w%:*}; pub="$NL${w##*:}=${x##*:}$pub";; esac;; esac
    pw=$w
  done
  [ -n "$port" ] || port=${2-}
  [ -n "$port" ] || port=8000
  case $pub in *"$NL$port="*) x=${pub#*"$NL$port="}; port=${x%%"$NL"*};; esac
  case $host in ''|0.0.0.0|::|'[::]') host=127.0.0.1;; esac
  url="http://$host:$port"
}
# HTTP from the node, several URLs in one curl (--next). Each transfer's -w line ends its body:
# "CODE RC SIZE URL" (RC: curl's exit code for that transfer, empty before curl 7.75; SIZE: the body's
# bytes, so the parser cuts the bodies from the end and no body can pass for another or for a -w line).
# The API key, when held, reaches curl on stdin (-H @-) for /v1/models only: it is in no argv.
# ca NAME...: curl's arguments for NAME... ("metrics", "version", "models"), appended to "$@" by the caller.
hw='\n%{http_code} %{exitcode} %{size_download} %{url_effective}\n'
# hg NAME...: one curl for NAME..., each transfer on its own (as separate curls were): an "http" section.
hg() {
  nm=$*; k=0; [ -n "$ak" ] && k=1; t=''
  case " $nm " in *' metrics '*) t=$(date +%s.%N);; esac
  set --
  for tn in $nm; do
    [ $# -eq 0 ] || set -- "$@" --next
    set -- "$@" -s --connect-timeout "$HT" --max-time "$HT" -w "$hw"
    case $tn in
      metrics) set -- "$@" "$url/metrics";;
      version) set -- "$@" "$url/version";;
      models) if [ $k = 1 ]; then set -- "$@" -H @-; fi; set -- "$@" "$url/v1/models";;
    esac
  done
  sec "http t=$t key=$k get=$nm"
  if [ $k = 1 ]; then printf 'Authorization: Bearer %s\n' "$ak" | curl "$@" 2>/dev/null
  else curl "$@" 2>/dev/null </dev/null; fi
  sec "rc $?"
}
# hc NAME...: /health, and NAME... in the same curl: they count only when /health said 2xx or 5xx (as
# asking them only then did), and --fail-early ends the curl at a /health without answer. A transfer
# that fail-early skipped (one before it got no answer) is asked again (hg), as it was before. Sets $h.
hc() {
  nm=$*; k=0; [ -n "$ak" ] && k=1; t=''
  case " $nm " in *' metrics '*) t=$(date +%s.%N);; esac
  set -- -s --fail-early --connect-timeout "$HT" --max-time "$HT" -o /dev/null -w '%{http_code} %{exitcode}\n' \
    "$url/health"
  for tn in $nm; do
    set -- "$@" --next -s --connect-timeout "$HT" --max-time "$HT" -w "$hw"
    case $tn in
      metrics) set -- "$@" "$url/metrics";;
      version) set -- "$@" "$url/version";;
      models) if [ $k = 1 ]; then set -- "$@" -H @-; fi; set -- "$@" "$url/v1/models";;
    esac
  done
  if [ $k = 1 ]; then o=$(printf 'Authorization: Bearer %s\n' "$ak" | curl "$@" 2>/dev/null)
  else o=$(curl "$@" 2>/dev/null </dev/null); fi
  r=$?
  x=${o%%"$NL"*}; h=${x%% *}; x=${x#"$h"}; x=${x# }
  if [ -z "$x" ]; then if [ -n "$h" ] && [ "$h" != 000 ]; then x=0; else x=$r; fi; fi
  sec "health rc=$x code=$h"
  case $h in 2*|5*) ;; *) return 0;; esac
  [ -n "$nm" ] || return 0
  case $o in *"$NL"*) o=${o#*"$NL"}$NL;; *) o='';; esac
  sec "http t=$t key=$k get=$nm"; printf '%s' "$o"; sec "rc $r"
  [ "$r" = 0 ] && return 0
  # The last -w line names the transfer that failed; the ones after it were skipped.
  x=${o%"$NL"}; x=${x##*"$NL"}; y=''; z=0
  for tn in $nm; do
    [ $z = 0 ] || y="$y $tn"
    case $tn:$x in metrics:*" $url/metrics"|version:*" $url/version"|models:*" $url/v1/models") z=1;; esac
  done
  [ $z = 0 ] || [ -z "$y" ] || hg $y
  return 0
}
# The /metrics sections made by awk from curl's output (+ curl's exit status on the last line), run as
# T=TIME awk -v hf=H -v mf=MF "$hmawk": with H=1 the first line is /health's (body to /dev/null) and
# /metrics counts only when /health said 2xx or 5xx; with MF=1 only the lines of MFR (the watcher's chart
# samples) and the status line are kept.
hmawk='{ l[NR] = $0 } END {
    x = l[NR]; i = 1; re = ENVIRON["MFR"]
    if (hf) {
      c = ""; r = x
      if (NR >= 2) { n = split(l[1], f, " "); c = f[1]; r = (n >= 2) ? f[2] : (c != "000" ? 0 : x) }
      printf "\n%s health rc=%s code=%s\n", ENVIRON["M"], r, c
      if (c !~ /^[25]/) exit
      i = 2
    }
    if (NR < i + 2) exit
    n = split(l[NR - 1], f, " "); c = f[1]; r = (n >= 2) ? f[2] : x
    printf "\n%s metrics rc=%s t=%s\n", ENVIRON["M"], r, ENVIRON["T"]
    s = ""; k = 0
    for (j = i; j <= NR - 2; j++) if (!mf || l[j] ~ re) s = s (k++ ? "\n" : "") l[j]
    if (mf) printf "%s%s%s", s, (k ? "\n" : ""), c; else printf "%s\n%s", s, c }'
pu() {
  u=$1; url=$2; lf=$3; bd=$4; ak=${5:-}
  sec "unit $u"; psec "unit $u"
  sh_=$(systemctl show -p "$PROPS" -- "$u" 2>&1); r=$?; psec "show rc=$r"; printf '%s\n' "$sh_" >&3
  # systemctl show's lines, read once by the shell (from the variable: `read` would take a byte per
  # system call): MainPID, InvocationID, ControlGroup, and the files the unit reads (EnvironmentFiles=,
  # ExecStart='s --config/--env-file).
  pid='' inv='' cg='' af='' pw='' a='' cl='' r=$sh_$NL
  while [ -n "$r" ]; do
    l=${r%%"$NL"*}; r=${r#*"$NL"}
    case $l in
      MainPID=*) pid=${l#MainPID=};;
      InvocationID=*) inv=${l#InvocationID=};;
      ControlGroup=*) cg=${l#ControlGroup=};;
      EnvironmentFiles=*' (ignore_errors='*')') x=${l#EnvironmentFiles=}; af="$af${x%" (ignore_errors="*}$NL";;
      'ExecStart={ path='*' ; argv[]='*' ; ignore_errors='*)
        x=${l#'ExecStart={ path='}
        case ${x%%' ; argv[]='*} in *';'*) continue;; esac
        x=${x#*' ; argv[]='}; x=${x% ; ignore_errors=*}' '
        while [ -n "$x" ]; do ap "${x%% *}"; x=${x#* }; done;;
    esac
  done
  live=0; [ -n "$pid" ] && [ "$pid" != 0 ] && live=1
  if [ $live = 1 ] && { [ "$ST" = 1 ] || [ -z "$url" ]; }; then
    cl=$(tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null)
  fi
  if [ "$ST" = 1 ]; then
    sec cat; systemctl cat -- "$u" 2>&1; sec "rc $?"
    if [ $live = 1 ]; then pw=''; r=$cl$NL; while [ -n "$r" ]; do ap "${r%%"$NL"*}"; r=${r#*"$NL"}; done; fi
    seen=$NL
    while [ -n "$af" ]; do
      f=${af%%"$NL"*}; af=${af#*"$NL"}
      case $seen in *"$NL$f$NL"*) continue;; esac
      seen="$seen$f$NL"; [ -z "$f" ] || rd "$f" file
    done
  fi
  BL=''
  if [ -n "$bd" ]; then
    case $bd in "~/"*) bd="$HOME/${bd#\~/}";; esac
    BL=$(ls -t -- "$bd"/*.json 2>/dev/null)
  fi
  if [ "$JL" -gt 0 ]; then
    if [ -n "$lf" ]; then
      src=file
      x=$( { tail -n "$JS" -- "$lf" 2>/dev/null || $S tail -n "$JS" -- "$lf" 2>/dev/null; } |
           BD=$bd BL=$BL awk -v jl="$JL" "$jawk")
    else
      if [ -n "$inv" ]; then src=invocation; set -- "_SYSTEMD_INVOCATION_ID=$inv"; else src=unit; set -- -u "$u"; fi
      x=$(journalctl "$@" -n "$JS" -o cat -a --no-pager 2>/dev/null | BD=$bd BL=$BL awk -v jl="$JL" "$jawk")
      case $x in E|E"$NL"*)
        [ -z "$S" ] ||
          x=$($S journalctl "$@" -n "$JS" -o cat -a --no-pager 2>/dev/null | BD=$bd BL=$BL awk -v jl="$JL" "$jawk");;
      esac
    fi
    bd=''  # its sections came with the journal's
    a=${x%%"$NL"*}; a=${a#[AE]}
    case $x in *"$NL"*) x=${x#*"$NL"};; *) x='';; esac
    sec "journal src=$src"; [ -z "$x" ] || printf '%s\n' "$x"
    # vLLM's own list of the arguments it got (second source, cross-check). It comes right after the
    # banner: when the scanned tail of a long-running start lacks it, read the start's first lines.
    if [ -z "$a" ] && [ -z "$lf" ] && [ -n "$inv" ]; then
      a=$(journalctl "_SYSTEMD_INVOCATION_ID=$inv" -o cat -a --no-pager 2>/dev/null | va)
      if [ -z "$a" ] && [ -n "$S" ]; then
        a=$($S journalctl "_SYSTEMD_INVOCATION_ID=$inv" -o cat -a --no-pager 2>/dev/null | va)
      fi
    fi
    sec vargs; printf '%s' "$a"
  fi
  if [ $live = 1 ]; then
    srv=''
    if [ "$ST" = 1 ]; then
      rd "/proc/$pid/cmdline" cmdline
      rd "/proc/$pid/environ" environ
    fi
    if [ -z "$url" ]; then
      # The port is on the server's command line: the main process's, a child's when the main one is a
      # wrapper, else the one vLLM logged.
      js=''; r=$cl$NL; while [ -n "$r" ]; do js="$js${r%%"$NL"*} "; r=${r#*"$NL"}; done
      case $js in *' serve '*|*vllm.entrypoints*) ;; *) [ "$ST" = 1 ] || procs "$pid" "$cg" "$cl";; esac
    fi
    [ "$ST" = 1 ] && procs "$pid" "$cg" "$cl"
    if [ -z "$url" ]; then
      case $js in
        *' serve '*|*vllm.entrypoints*) ;;
        *) [ -z "$srv" ] || cl=$(tr '\0' '\n' < "/proc/$srv/cmdline" 2>/dev/null);;
      esac
      lp=''; x=$a
      while :; do
        case $x in *"'port': "[0-9]*) ;; *) break;; esac
        y=${x##*"'port': "}; lp=${y%%[!0-9]*}
        [ -n "$lp" ] && break
        x=${x%"'port': "*}
      done
      du "$cl" "$lp"
    fi
  fi
  if [ -n "$url" ]; then
    sec "url $url"
    if [ "$MS" = 1 ] && [ "$VM" = 0 ]; then
      # /health and the one /metrics scrape in one curl: --fail-early ends it at a /health without answer.
      t=$(date +%s.%N)
      { curl -s --fail-early --connect-timeout "$HT" --max-time "$HT" -o /dev/null -w '%{http_code} %{exitcode}\n' \
          "$url/health" --next -s --connect-timeout "$HT" --max-time "$HT" -w '\n%{http_code} %{exitcode}\n' \
          "$url/metrics" 2>/dev/null </dev/null; echo "$?"; } | T=$t awk -v hf=1 -v mf="$MF" "$hmawk"
    else
      # /health, the first /metrics scrape (unless filtered), /version and /v1/models: one curl.
      n=0; g=''
      if [ "$MS" -gt 0 ] && [ "$MF" = 0 ]; then g=metrics; n=1; fi
      [ "$VM" = 1 ] && g="$g version models"
      hc $g
      case $h in 2*|5*)
        while [ "$n" -lt "$MS" ]; do
          [ "$n" -gt 0 ] && sleep "$MI"
          if [ "$MF" = 1 ]; then
            t=$(date +%s.%N)
            { curl -s --connect-timeout "$HT" --max-time "$HT" -w '\n%{http_code} %{exitcode}\n' "$url/metrics" \
                2>/dev/null </dev/null; echo "$?"; } | T=$t awk -v hf=0 -v mf="$MF" "$hmawk"
          else hg metrics; fi
          n=$((n+1))
        done;;
      esac
    fi
  fi
  if [ "$LL" -gt 0 ]; then
    if [ -n "$lf" ]; then j=$(tail -n "$LL" -- "$lf" 2>/dev/null || $S tail -n "$LL" -- "$lf" 2>/dev/null)
    else j=$(journalctl -u "$u" -o short-iso -a --no-pager -n "$LL" 2>/dev/null)
      if [ -z "$j" ] && [ -n "$S" ]; then j=$($S journalctl -u "$u" -o short-iso -a --no-pager -n "$LL" 2>/dev/null); fi
    fi
    sec logs; printf '%s' "$j"
  fi
  [ -z "$bd" ] || BD=$bd BL=$BL awk "$bawk"' BEGIN { bench() }'
}
"""
_DISCOVER = r"""
discover() {
  us=$( { systemctl list-units --type=service --all --plain --no-legend --no-pager 2>/dev/null | awk '{print $1}'
          systemctl list-unit-files --type=service --no-legend --no-pager 2>/dev/null | awk '{print $1}'; } |
        grep -v '@\.service$' | sort -u)
  [ -n "$us" ] || return 0
  # Running vLLM processes, whatever launched them: vLLM's name, the VLLM:: titles it gives its engine
  # and workers, or a serve subcommand with vLLM-only flags. The pattern travels in the environment, not
  # in argv, and this probe's own processes (their text holds the marker) are left out.
  hp=$(head -c 4096 -- /dev/null /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | DP="$DPAT" MK="$MB" awk '
    /^==> \/proc\/[0-9]+\/cmdline <==$/ { split($2, a, "/"); cur = a[3]; next }
    cur == "" { next }
    index($0, ENVIRON["MK"]) { no[cur] = 1 }
    $0 ~ ENVIRON["DP"] { hit[cur] = 1 }
    END { for (p in hit) if (!(p in no)) print p }' | head -n 200)
  hot=''
  if [ -n "$hp" ]; then
    set --; for q in $hp; do set -- "$@" "/proc/$q/cgroup"; done
    # A process's cgroup names its unit. Its parents up to three levels (engine -> server -> wrapper) are
    # also matched against the units' main PIDs (no systemd cgroups in the way), except for processes of
    # a login session's scope: run by hand, they belong to no unit.
    hot=$( { grep -H '' -- "$@" 2>/dev/null | sed 's/^/C /'; printf '%s\n' $hp | sed 's/^/H /'
             cat /proc/[0-9]*/stat 2>/dev/null | statrows | sed 's/^/S /'; } | awk '
      $1 == "S" { pp[$2] = $3; next }
      $1 == "H" { h[$2] = 1; next }
      $1 == "C" { split($2, a, "/"); n = split($0, b, ":"); k = split(b[n], c, "/")
                  if (c[k] ~ /\.service$/) unit[a[3]] = c[k]; if (c[k] ~ /\.scope$/) scope[a[3]] = 1 }
      END { for (p in h) { if (p in unit) print "U=" unit[p]
                           if (p in scope) continue
                           x = p; for (i = 0; i < 4 && x > 1; i++) { print "P=" x; x = pp[x] } } }' | sort -u)
  fi
  # shellcheck disable=SC2086 -- unit names from systemd itself, split on purpose
  # One paragraph per unit; properties come in D-Bus order (ExecStart before Id), so judge whole blocks.
  systemctl show -p Id,ExecStart,MainPID,Environment -- $us 2>/dev/null |
  HOT=" $(echo $hot) " DP="$DPAT" awk 'BEGIN{RS=""} {
    id=""; mp=""; hit=0; n=split($0, L, "\n")
    for(i=1;i<=n;i++){ if(L[i] ~ /^Id=/) id=substr(L[i],4); else if(L[i] ~ /^MainPID=/) mp=substr(L[i],9)
      else if(L[i] ~ /^ExecStart=/ && L[i] ~ ENVIRON["DP"]) hit=1
      else if(L[i] ~ /^Environment=/ && L[i] ~ /(=| |")VLLM_[A-Z0-9_]+=/) hit=1 }
    if(id ~ /vllm/) hit=1
    if(id != "" && index(ENVIRON["HOT"], " U=" id " ")) hit=1
    if(mp != "" && mp != "0" && index(ENVIRON["HOT"], " P=" mp " ")) hit=1
    if(hit && id!="") print id }' | sort -u
}
"""


def _q(value: str) -> str:
    return shlex.quote(value)


def _minify(script: str) -> str:
    """The script as sent: no comment lines, no indentation, no blank lines (a third of its bytes).

    Safe for this text: no line of it (nor of its awk programs) starts with ``#`` unless it is a comment,
    no quoted string spans a blank or an indented line whose spaces matter, and a backslash-continued
    line keeps the space before its backslash.
    """
    out = (line.lstrip() for line in script.split("\n"))
    return "\n".join(line for line in out if line and not line.startswith("#"))


_SENT_HELPERS = _minify(_HELPERS)
_SENT_DISCOVER = _minify(_DISCOVER)


def build_script(targets: list[ProbeTarget], options: ProbeOptions, session: bool = False) -> str:
    """The remote script for ``targets`` (or unit discovery when ``options.discover``).

    ``session``: the same probe as a loop that answers once per line read from stdin, each answer followed
    by the line ``<marker> done`` (:func:`session_answer_end`), until stdin ends. What the bot writes is a
    trigger only: it is read into a variable nothing looks at, and the probe itself reads /dev/null, so no
    byte the bot sends reaches anything. It reads no API key (stdin is the trigger): a session cannot ask
    ``/v1/models`` with one.
    """
    if session and any(t.models for t in targets):
        raise ValueError("a persistent probe reads no API key: its stdin is the trigger")
    for t in targets:
        # Defence in depth: the config validated these, but the script must never see anything else.
        if not UNIT_RE.match(t.unit):
            raise ValueError(f"refusing unit name {t.unit!r}")
        if t.api_url and not API_URL_RE.match(t.api_url):
            raise ValueError(f"refusing api_url {t.api_url!r}")
        for p in (t.log_file, t.bench_dir):
            if p and not PATH_RE.match(p):
                raise ValueError(f"refusing path {p!r}")
    lines = [
        _SENT_HELPERS,
        _SENT_DISCOVER if options.discover else "",
        f"PROPS={_q(SHOW_PROPERTIES)}",
        f"HT={options.http_timeout_s:g}; MS={options.metrics_samples}; MI={options.metrics_interval_s:g}",
        f"JL={options.journal_lines}; LL={options.log_lines}; JS={max(JOURNAL_SCAN, options.journal_lines)}",
        f"PN={MAX_PROCS}; CB={MAX_ARGV_BYTES}; AS={ARGS_SCAN}",
        f"ST={int(options.settings)}; VM={int(options.api_info)}; MF={int(options.metrics_filter)}",
        # awk reads the patterns from its environment (-v would process backslashes).
        f"JF={_q(JOURNAL_FILTER)}; MFR={_q(METRICS_FILTER)}; BR={_q(BENCH_RE)}; export JF MFR BR",
    ]
    if options.discover:
        lines.append(f"DPAT={_q(DISCOVER_PATTERN)}")
    lines.append("main() {")
    for i, t in enumerate(targets):
        if t.models:
            # One line of stdin per such target (see stdin_for), read before anything else can touch stdin:
            # into a shell variable, never into an argv.
            lines.append(f"IFS= read -r AK{i} || AK{i}=''")
    lines += [
        "set -- $(date '+%s %z')",
        'psec "node now=${1-} tz=${2-} uid=$U host=$(hostname 2>/dev/null)"',
    ]
    if options.gpus:
        lines += [
            "g=$(nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,"
            "temperature.gpu,power.draw --format=csv,noheader,nounits 2>&1); r=$?",
            'psec "gpus rc=$r"; printf \'%s\\n\' "$g" >&3',
            "a=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid "
            "--format=csv,noheader,nounits 2>&1); r=$?",
            'psec "gpu-apps rc=$r"; printf \'%s\\n\' "$a" >&3',
            # The process tree tells a running service's GPU workers from leftovers of a crash: the ancestry
            # of the GPU processes, read by the first unit's process awk (or at the end: procs, pawk).
            "PSA=$a",
        ]
    for i, t in enumerate(targets):
        bench = (t.bench_dir or "") if options.bench else ""
        key = f' "$AK{i}"' if t.models else ""
        lines.append(f"pu {_q(t.unit)} {_q(t.api_url or '')} {_q(t.log_file or '')} {_q(bench)}{key}")
    if options.discover:
        lines += [
            'found=$(discover); sec "discovered $(echo $found)"',
            'for u in $found; do pu "$u" "" "" ""; done',
        ]
    if options.gpus:
        lines.append('[ -z "$PSA" ] || PSA=$PSA awk -v mode=a "$pawk"')
    lines.append("sec end")
    # One base64 for everything (raw sections inside, see the module's docstring), written at once (one
    # write): each small write would otherwise travel as its own SSH packet, and the bot's per-packet cost
    # (decrypt, parse, in Python) was most of its CPU per question. The last line, plain, says it finished.
    answer = ['o=$( { b=$(main 3>&4 | base64 -w0); printf \'%s b64 %s\\n%s end\' "$MB" "$b" "$MB"; } 4>&1 )',
              "printf '%s' \"$o$NL\""]
    if not session:
        lines += ["}", *answer]
    else:
        # One answer per line read (the bot's trigger, read into t and never used), each with a fresh marker
        # value (nn), then the line "<marker> done": no byte inside an answer can end it early. The probe
        # reads /dev/null, never the trigger stream. At the end of stdin (the bot closed the channel) the
        # loop ends, and so does the shell; in between it sits in read(2), costing the node nothing.
        answer[0] = answer[0].replace("$(main 3>&4 |", "$(main 3>&4 </dev/null |")
        lines += ["}", "while IFS= read -r t; do", "nn", answer[0], "printf '%s' \"$o$NL$M done$NL\"", "done"]
    return "\n".join(lines) + "\n"


SESSION_DONE = b" done\n"


def session_answer_end(data: bytes | bytearray) -> int | None:
    """Where the first answer of a persistent probe session ends in ``data`` (its ``done`` line cut off), or
    None while it is incomplete.

    The answer's own marker value is read from its first marker line (the node line, before any content),
    and the answer is complete when ``data`` ends with ``<marker><value> done``: content cannot hold that
    value, so no byte the node prints can end an answer early, and bytes after it (which the bot never
    asked for) leave it incomplete.
    """
    if not data.endswith(SESSION_DONE):
        return None
    mark = b"\n" + MARK.encode()
    first = data.find(mark)
    if first < 0:
        return None
    value_end = data.find(b" ", first + len(mark))
    if value_end < 0:
        return None
    value = data[first + len(mark) : value_end]
    if not value or b"\n" in value:
        return None
    done = mark + value + SESSION_DONE
    if not data.endswith(done) or len(data) - len(done) <= first:
        return None
    return len(data) - len(done) + 1  # the answer keeps its own last newline


def stdin_for(targets: list[ProbeTarget], keys: list[str | None]) -> str | None:
    """The probe's stdin: one API key per line, for the targets with ``models`` (in order)."""
    wanted = [k or "" for t, k in zip(targets, keys, strict=True) if t.models]
    if not wanted:
        return None
    for k in wanted:
        if "\n" in k or "\r" in k:
            raise ValueError("an API key may not contain a line break")
    return "".join(k + "\n" for k in wanted)


def remote_command(script: str) -> str:
    """The command line sent over SSH: the script run by ``sh`` whatever the login shell is (``exec``: the
    login shell does not stay around as a second process)."""
    return "exec sh -c " + shlex.quote(script)


@functools.lru_cache(maxsize=64)
def probe_command(targets: tuple[ProbeTarget, ...], options: ProbeOptions) -> str:
    """``remote_command(build_script(targets, options))``, one shared string per distinct probe.

    The command is about 17 KB and is referenced until its node has answered: built per node, a question to
    512 nodes held 512 copies of it and of the script it quotes (17 MB) while the answers arrived. Nodes that
    run the same units share one string (immutable, so sharing is safe), and the script is not built again
    for every node and question. It holds no secret (API keys go on stdin: ``stdin_for``). At most 64 are
    kept (about 1 MB).
    """
    return remote_command(build_script(list(targets), options))


SESSIONS_KEPT = 4096  # distinct persistent-session commands remembered (about one per node at most)


@functools.lru_cache(maxsize=SESSIONS_KEPT)
def session_command(targets: tuple[ProbeTarget, ...], options: ProbeOptions) -> str:
    """The command of a persistent probe session (``build_script(..., session=True)``), one shared string
    per distinct probe.

    It is asked for every poll of every node (the pool compares it with its open session's to notice a
    changed config), so it is built once; sessions hold these strings anyway, so keeping them costs little.
    """
    return remote_command(build_script(list(targets), options, session=True))


# ---------------------------------------------------------------------------------------------
# Parsing what the script printed


class ReadFile(Model):
    """A file read on the node (base64 on the wire); ``data`` is None when it could not be read."""

    path: str
    rc: int
    data: bytes | None = None


class MetricsScrape(Model):
    at: float
    probe: HttpProbe


class ProcRow(Model):
    """One process of a unit (from ``/proc/PID/stat``) and its argv when it could be read."""

    pid: int
    ppid: int
    comm: str = ""
    argv: list[str] | None = None


class UnitRaw(Model):
    """What the probe printed about one unit, decoded but not yet interpreted."""

    unit: str
    show_rc: int = 0
    show: str = ""
    cat_rc: int = 0
    cat: str = ""
    cmdline: ReadFile | None = None
    environ: ReadFile | None = None
    files: dict[str, ReadFile] = Field(default_factory=dict)
    url: str | None = None
    health: HttpProbe | None = None
    version: HttpProbe | None = None
    metrics: list[MetricsScrape] = Field(default_factory=list)
    models: HttpProbe | None = None
    models_keyed: bool = False  # /v1/models was asked with the bot's API key
    procs: list[ProcRow] = Field(default_factory=list)  # the unit's processes, main process included
    procs_src: str | None = None  # the cgroup.procs file read, "ppid" (descendants of MainPID), None: not asked
    child_environ: ReadFile | None = None  # environ of the first other process that looked like a server
    vargs: str | None = None  # vLLM's "non-default args: {…}" start-up line (holds secrets: redact)
    journal: str | None = None
    journal_src: str | None = None
    logs: str | None = None
    bench_dir: str | None = None
    bench_files: dict[str, str] = Field(default_factory=dict)


class NodeRaw(Model):
    """What the probe printed about one node."""

    now: datetime | None = None
    tz: str = "+0000"
    uid: int | None = None
    host: str = ""
    gpus_rc: int | None = None
    gpus: str = ""
    gpu_apps_rc: int | None = None
    gpu_apps: str = ""
    parents: dict[int, int] = Field(default_factory=dict)  # pid -> ppid
    units: list[UnitRaw] = Field(default_factory=list)
    discovered: list[str] | None = None
    complete: bool = False


_KV = re.compile(r"(\w+)=(\S*)")


def _kv(rest: str) -> dict[str, str]:
    return dict(_KV.findall(rest))


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=False)
    except ValueError:
        return b""


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default


def _http(url: str, rc: int, body_and_code: str) -> HttpProbe:
    body, _, code = body_and_code.rpartition("\n")
    status = _int(code.strip(), 0) or None
    return HttpProbe(url=url, status=status, curl_exit=rc, body=body)


def _txt(data: bytes) -> str:
    """A section captured by ``$(...)`` on the node before: decoded, trailing newlines dropped."""
    return data.decode("utf-8", "replace").rstrip("\n")


def _streams(stdout: str) -> list[bytes]:
    """The sections' bytes: what came plain, then the base64 line decoded (a script run piecewise, as tests
    do, has no base64 line: all of it is plain)."""
    text = stdout if stdout.startswith("\n") else "\n" + stdout  # every marker then follows a newline
    at = text.rfind("\n" + WRAP)  # the last: plain text before it cannot end the plain part early
    if at < 0:
        return [text.encode("utf-8", "surrogateescape")]
    end = text.find("\n", at + 1)
    blob = text[at + 1 + len(WRAP) : end if end > 0 else len(text)]
    data = _b64(blob)
    return [text[:at].encode("utf-8", "surrogateescape"), data if data.startswith(b"\n") else b"\n" + data]


def _transfers(data: bytes) -> list[tuple[str, str, str, bytes]]:
    """``(code, exitcode, url, body)`` of each curl transfer in ``data``, in the order curl made them.

    Each transfer wrote its body, then ``\nCODE EXITCODE SIZE URL\n``; walking from the end, SIZE says where
    a body starts, so nothing inside a body is ever read as a ``-w`` line. Stops where the shape breaks.
    """
    out: list[tuple[str, str, str, bytes]] = []
    rest = data
    while rest.endswith(b"\n"):
        cut = rest.rfind(b"\n", 0, len(rest) - 1)
        fields = rest[cut + 1 : -1].decode("utf-8", "replace").split(" ", 3)
        if cut < 0 or len(fields) != 4 or not fields[2].isdigit() or int(fields[2]) > cut:
            break
        start = cut - int(fields[2])
        out.append((fields[0], fields[1], fields[3], rest[start:cut]))
        rest = rest[:start]
    out.reverse()
    return out


_PATHS = {"metrics": "/metrics", "version": "/version", "models": "/v1/models"}


def _attach_http(unit: UnitRaw, kv: dict[str, str], data: bytes, rc: int) -> None:
    """The ``http`` section: the transfers of one curl, each known by its URL."""
    names = kv.get("get", "").split()
    got = _transfers(data)
    if not got and names and rc != 0:
        got = [("", "", f"{unit.url}{_PATHS.get(names[0], '')}", b"")]  # curl made none (not installed, killed)
    for i, (code, exit_code, url, body) in enumerate(got):
        if exit_code.isdigit():
            curl_exit = int(exit_code)
        elif code and code != "000":
            curl_exit = 0  # curl before 7.75 writes no per-transfer exit code: an answer means it went through
        else:
            curl_exit = rc if i == len(got) - 1 else rc or 1  # the last one's is curl's own exit status
        probe = HttpProbe(url=url, status=_int(code, 0) or None, curl_exit=curl_exit,
                          body=body.decode("utf-8", "replace"))
        if url == f"{unit.url}/version":
            unit.version = probe
        elif url == f"{unit.url}/v1/models":
            unit.models, unit.models_keyed = probe, kv.get("key", "1") == "1"
        elif url == f"{unit.url}/metrics":
            unit.metrics.append(MetricsScrape(at=float(kv.get("t", "0") or 0), probe=probe))


def parse_output(stdout: str) -> NodeRaw:
    """Split the probe's output into typed, decoded sections."""
    node = NodeRaw()
    streams = _streams(stdout)
    mark = b"\n" + MARK.encode()
    first = next((d for d in streams if d.startswith(mark)), None)
    if first is None:
        return node
    eol = first.find(b"\n", 1)
    nonce = first[len(mark) : eol if eol > 0 else len(first)].split(b" ", 1)[0]
    unit: UnitRaw | None = None
    # A section whose exit status follows its content (an "rc" marker): name, its key=values, its bytes.
    pending: tuple[str, dict[str, str], bytes] | None = None

    def finish(rc: int) -> None:
        nonlocal pending
        if pending is None or unit is None:
            pending = None
            return
        name, kv, content = pending
        pending = None
        if name == "cat":
            unit.cat_rc, unit.cat = rc, _txt(content)
        elif name == "http":
            _attach_http(unit, kv, content, rc)
        else:
            body = _b64(content.decode("ascii", "replace")) if kv.get("b64") == "1" else content
            rf = ReadFile(path=kv.get("path", ""), rc=rc, data=body if rc == 0 else None)
            if name == "file":
                unit.files[rf.path] = rf
            elif name == "cmdline":
                unit.cmdline = rf
            elif name == "cenviron":
                unit.child_environ = rf
            else:
                unit.environ = rf

    by_name: dict[str, UnitRaw] = {}
    # Each stream starts outside any unit (an empty "unit" section between them).
    for part in [p for d in streams for p in [b"unit ", *d.split(mark + nonce + b" ")[1:]]]:
        head_bytes, _, content = part.partition(b"\n")
        head, _, rest = head_bytes.decode("utf-8", "replace").partition(" ")
        if head == "rc":
            finish(_int(rest.strip(), 1))
            continue
        if pending is not None:
            finish(1)  # cut short before its status
        kv = _kv(rest)
        if head in ("file", "cmdline", "environ", "cenviron", "benchfile"):
            # Paths may contain spaces: everything after "path=" is the path.
            kv["path"] = rest.partition("path=")[2]
        elif head == "http":
            kv["get"] = rest.partition("get=")[2]
        if head == "node":
            if kv.get("now", "").isdigit():
                node.now = datetime.fromtimestamp(int(kv["now"]), UTC)
            node.tz = kv.get("tz") or "+0000"
            node.uid = _int(kv.get("uid"), -1)
            node.host = kv.get("host", "")
        elif head == "gpus":
            node.gpus_rc, node.gpus = _int(kv.get("rc")), _txt(content)
        elif head == "gpu-apps":
            node.gpu_apps_rc, node.gpu_apps = _int(kv.get("rc")), _txt(content)
        elif head == "ps":
            for row in content.decode("ascii", "replace").split("\n"):
                parts = row.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    node.parents[int(parts[0])] = int(parts[1])
        elif head == "unit":
            # Each stream names the unit its sections belong to (the plain one and the base64 one).
            name = rest.strip()
            if not name:
                unit = None
            elif name in by_name:
                unit = by_name[name]
            else:
                unit = by_name[name] = UnitRaw(unit=name)
                node.units.append(unit)
        elif head == "discovered":
            node.discovered = rest.split()
        elif head == "end":
            node.complete = True
        elif unit is None:
            continue
        elif head in ("cat", "http", "file", "cmdline", "environ", "cenviron"):
            pending = (head, kv, content)
        elif head == "show":
            unit.show_rc, unit.show = _int(kv.get("rc")), _txt(content)
        elif head == "procs":
            unit.procs_src = kv.get("src") or None
            for row in content.decode("utf-8", "replace").split("\n"):
                cols = row.split(" ", 2)
                if len(cols) >= 2 and cols[0].isdigit() and cols[1].isdigit():
                    comm = cols[2] if len(cols) > 2 else ""
                    unit.procs.append(ProcRow(pid=int(cols[0]), ppid=int(cols[1]), comm=comm))
        elif head == "argvs":
            _attach_argvs(unit, content)
        elif head == "journal":
            unit.journal, unit.journal_src = content.decode("utf-8", "replace"), kv.get("src")
        elif head == "vargs":
            unit.vargs = content.decode("utf-8", "replace") or None
        elif head == "url":
            unit.url = rest.strip()
        elif head == "health":
            unit.health = HttpProbe(url=f"{unit.url}/health", status=_int(kv.get("code"), 0) or None,
                                    curl_exit=_int(kv.get("rc")))
        elif head == "metrics":
            probe = _http(f"{unit.url}/metrics", _int(kv.get("rc")), content.decode("utf-8", "replace"))
            unit.metrics.append(MetricsScrape(at=float(kv.get("t", "0") or 0), probe=probe))
        elif head == "logs":
            unit.logs = content.decode("utf-8", "replace")
        elif head == "bench":
            unit.bench_dir = kv.get("dir")
        elif head == "benchfile":
            unit.bench_files[kv["path"]] = _txt(content)
    if pending is not None:
        finish(1)
    return node


_ARGV_HEADER = re.compile(rb"(?:^|\n)==> /proc/(\d+)/cmdline <==\n")


def _attach_argvs(unit: UnitRaw, data: bytes) -> None:
    """Split ``head``'s output (``==> /proc/PID/cmdline <==`` before each file) onto ``unit.procs``.

    Headers are taken in the order of the processes asked for, so an argv that happens to contain a
    header line can at worst cut its own text short, never be read as another PID's.
    """
    by_pid = {p.pid: p for p in unit.procs}
    marks = [(m.start(), m.end(), int(m.group(1))) for m in _ARGV_HEADER.finditer(data)]
    order = [p.pid for p in unit.procs]
    pos = {pid: i for i, pid in enumerate(order)}
    picked: list[tuple[int, int, int]] = []
    last = -1
    for start, end, pid in marks:
        if pid in pos and pos[pid] > last:
            picked.append((start, end, pid))
            last = pos[pid]
    for i, (_start, end, pid) in enumerate(picked):
        stop = picked[i + 1][0] if i + 1 < len(picked) else len(data)
        by_pid[pid].argv = split_nul(data[end:stop])


def split_nul(data: bytes) -> list[str]:
    """``/proc/PID/cmdline`` bytes to argv (NUL separated; trailing NULs dropped)."""
    parts = data.decode("utf-8", "replace").split("\0")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def environ_dict(data: bytes) -> dict[str, str]:
    """``/proc/PID/environ`` bytes to a dict."""
    env: dict[str, str] = {}
    for item in split_nul(data):
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    return env
