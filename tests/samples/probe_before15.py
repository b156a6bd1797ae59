"""The probe as it was before issue 15 (frozen copy of ``services/node/probe.py`` at main 78502f7).

Kept only so ``tests/test_probe_facts.py`` can run the old and the new probe side by side on the same
simulated node and check that the new one, with a tenth of the processes, delivers the same facts. Never
imported by the product.
"""

from __future__ import annotations

import base64
import re
import shlex
from datetime import UTC, datetime

from pydantic import Field

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
# of the body, and the watcher scrapes every service every interval.
METRICS_FILTER = (
    r"^(vllm:(prompt_tokens_total|generation_tokens_total|num_requests_running|num_requests_waiting|"
    r"kv_cache_usage_perc|gpu_cache_usage_perc)[{ ]|[0-9]{3}$)"
)
BENCH_KEYS = (
    "date|max_concurrency|output_throughput|request_rate|model_id|completed|num_prompts|mean_tpot_ms|"
    "median_ttft_ms|p99_ttft_ms|max_output_tokens_per_s|backend|label"
)


class ProbeTarget(Model):
    """One unit to look at; every field comes from the validated config."""

    unit: str
    api_url: str | None = None
    log_file: str | None = None
    bench_dir: str | None = None
    models: bool = False  # list /v1/models with the API key the bot sends on stdin (never on a command line)


class ProbeOptions(Model):
    """What a question needs from the node; numbers only, chosen by handlers."""

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


_HELPERS = r"""
set -u
export LC_ALL=C SYSTEMD_COLORS=0 SYSTEMD_PAGER= PAGER=cat
M='@@inferbot@@'
CGR=/sys/fs/cgroup
if [ "$(id -u)" = 0 ]; then S=''; else S='sudo -n'; fi
b64() { base64 -w0 2>/dev/null; echo; }
# Files the login user cannot read (another user's /proc/PID/environ, 0600 env files) go through sudo -n,
# which never prompts: without a sudoers rule it fails and the bot says it fell back to the unit.
rd() { if [ -r "$1" ]; then base64 -w0 -- "$1"; else $S base64 -w0 -- "$1"; fi; }
rdsec() {
  d=$(rd "$1" 2>/dev/null); r=$?; echo "$M $2 rc=$r path=$1"; echo "$d"
}
get() { curl -s --connect-timeout "$HT" --max-time "$HT" -w '\n%{http_code}' "$1" 2>/dev/null; }
jn() { journalctl "$@" -o cat -a --no-pager 2>/dev/null || true; }
# A user outside systemd-journal sees "-- No entries --" (rc 0) for system units: then try sudo -n.
jp() {
  j=$(jn "$@")
  case $j in ''|'-- No entries --') [ -n "$S" ] && j=$($S journalctl "$@" -o cat -a --no-pager 2>/dev/null) ;; esac
  case $j in '-- No entries --') j='' ;; esac
}
# Of the repetitive lines (shard progress, periodic stats) only the newest few matter; every other marker
# is kept, in order, so the phase read from the last marker stays right.
thin() {
  awk '{ l[NR]=$0; if (index($0, "Completed |")) np++; else if (index($0, "throughput: ")) ns++ }
       END { p=0; s=0
             for (i = 1; i <= NR; i++) { x = l[i]
               if (index(x, "Completed |")) { if (++p > np - 3) print x }
               else if (index(x, "throughput: ")) { if (++s > ns - 3) print x }
               else print x } }'
}
# "pid ppid comm" from /proc/PID/stat lines (comm may hold spaces and parens: cut at the last ") ").
statrows() {
  awk '{ i = index($0, " ("); k = 0
         while ((t = index(substr($0, k + 1), ") ")) > 0) k += t
         if (i < 2 || k <= i) next
         comm = substr($0, i + 2, k - i - 2); gsub(/[^A-Za-z0-9_.:@+-]/, "_", comm)
         split(substr($0, k + 2), f, " "); print substr($0, 1, i - 1), f[2], comm }'
}
# The unit's processes: its cgroup (v2; v1's systemd hierarchy; hybrid's unified one), else the main
# process's descendants from every /proc/PID/stat. Then their argv in one read: head's "==> FILE <=="
# headers delimit them (/dev/null first, so there is a header even for one file), base64 on the wire.
procs() {
  p=$1; cg=$2; psrc=''; l=''; sv=''
  case $cg in /*..*|'') cg='';; /*) ;; *) cg='';; esac
  if [ -n "$cg" ]; then
    for f in "$CGR$cg/cgroup.procs" "$CGR/systemd$cg/cgroup.procs" "$CGR/unified$cg/cgroup.procs"; do
      [ -r "$f" ] || continue
      l=$(sort -n -- "$f" 2>/dev/null | head -n "$PN")
      if [ -n "$l" ]; then psrc=$f; break; fi
    done
  fi
  if [ -n "$psrc" ]; then
    set --; for q in $l; do case $q in *[!0-9]*) ;; *) set -- "$@" "/proc/$q/stat";; esac; done
    rows=$(cat -- "$@" 2>/dev/null | statrows)
  else
    psrc=ppid
    # statrows and the walk in one awk: the stat lines' "pid (comm) S ppid" is read here directly.
    rows=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$p" -v max="$PN" '
      { i = index($0, " ("); k = 0
        while ((t = index(substr($0, k + 1), ") ")) > 0) k += t
        if (i < 2 || k <= i) next
        comm = substr($0, i + 2, k - i - 2); gsub(/[^A-Za-z0-9_.:@+-]/, "_", comm)
        split(substr($0, k + 2), f, " "); pid = substr($0, 1, i - 1)
        line[pid] = pid " " f[2] " " comm; kids[f[2]] = kids[f[2]] " " pid }
      END { q[1] = root; h = 1; t = 1; c = 0
            while (h <= t && c < max) { x = q[h++]; if (x in line) { print line[x]; c++ }
              k = split(kids[x], ch, " "); for (i = 1; i <= k; i++) q[++t] = ch[i] } }')
  fi
  echo "$M procs src=$psrc"; printf '%s\n' "$rows"
  # The main process is vLLM itself (`vllm serve`, its console script, the api_server module): the
  # others are its engine and workers, whose argv tells nothing; skip reading them.
  d=$(tr '\0' '\n' < "/proc/$p/cmdline" 2>/dev/null | awk '
    NR <= 2 && $0 ~ /(^|\/)vllm$/ { v = NR } NR == v + 1 && v && $0 == "serve" { print 1; exit }
    NR <= 2 && $0 ~ /(^|\/)python[0-9.]*$/ { py = NR } py && NR == py + 1 && $0 == "-m" { m = NR }
    m && NR == m + 1 && $0 == "vllm.entrypoints.openai.api_server" { print 1; exit } NR > 4 { exit }')
  [ -z "$d" ] || return 0
  set --
  while read -r q _; do [ -z "$q" ] || [ "$q" = "$p" ] || set -- "$@" "/proc/$q/cmdline"; done <<EOF_ROWS
$rows
EOF_ROWS
  [ $# -gt 0 ] || return 0
  echo "$M argvs"; head -c "$CB" -- /dev/null "$@" 2>/dev/null | b64
  # The environment of the first other process that looks like a server (a wrapper that forks, such as
  # sudo, may have handed its child a different one).
  sv=$(head -c "$CB" -- /dev/null "$@" 2>/dev/null | tr '\0' ' ' | awk '
    /^==> \/proc\/[0-9]+\/cmdline <==$/ { split($2, a, "/"); cur = a[3]; next }
    cur != "" && !/^VLLM::/ && (/ serve / || /vllm\.entrypoints/) { print cur; exit }')
  [ -n "$sv" ] && rdsec "/proc/$sv/environ" cenviron
  srv=$sv
  return 0
}
argpaths() { awk 'p=="--config"||p=="--env-file"{print} /^--env-file=/{sub(/^--env-file=/,"");print} {p=$0}'; }
derive_url() {
  tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null | awk -v lp="${2:-}" '
    p=="--port"{port=$0} /^--port=/{sub(/^--port=/,""); port=$0}
    p=="--host"{host=$0} /^--host=/{sub(/^--host=/,""); host=$0}
    p=="-p"||p=="--publish"{n=split($0,a,":"); if(n>=2){pub[a[n]]=a[n-1]}}
    {p=$0}
    END{ if(port=="")port=lp; if(port=="")port="8000"; if(port in pub)port=pub[port];
         if(host==""||host=="0.0.0.0"||host=="::"||host=="[::]")host="127.0.0.1";
         print "http://" host ":" port }'
}
pu() {
  u=$1; url=$2; lf=$3; bd=$4; ak=${5:-}
  echo "$M unit $u"
  sh_=$(systemctl show -p "$PROPS" -- "$u" 2>&1); r=$?; echo "$M show rc=$r"; printf '%s\n' "$sh_"
  c=$(systemctl cat -- "$u" 2>&1); r=$?; echo "$M cat rc=$r"; printf '%s' "$c" | b64
  pid=$(printf '%s\n' "$sh_" | sed -n 's/^MainPID=//p'); inv=$(printf '%s\n' "$sh_" | sed -n 's/^InvocationID=//p')
  { printf '%s\n' "$sh_" | sed -n 's/^EnvironmentFiles=\(.*\) (ignore_errors=.*)$/\1/p'
    printf '%s\n' "$sh_" | sed -n 's/^ExecStart={ path=[^;]* ; argv\[\]=\(.*\) ; ignore_errors=.*$/\1/p' |
      tr ' ' '\n' | argpaths
    if [ -n "$pid" ] && [ "$pid" != 0 ]; then tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | argpaths; fi
  } | sort -u | while IFS= read -r f; do [ -n "$f" ] && rdsec "$f" file; done
  a=''
  if [ "$JL" -gt 0 ]; then
    if [ -n "$lf" ]; then j=$(tail -n "$JS" -- "$lf" 2>/dev/null || $S tail -n "$JS" -- "$lf" 2>/dev/null); src=file
    elif [ -n "$inv" ]; then jp "_SYSTEMD_INVOCATION_ID=$inv" -n "$JS"; src=invocation
    else jp -u "$u" -n "$JS"; src=unit; fi
    echo "$M journal src=$src"; printf '%s\n' "$j" | grep -E -- "$JF" | thin | tail -n "$JL" | b64
    # vLLM's own list of the arguments it got (second source, cross-check). It comes right after the
    # banner: when the scanned tail of a long-running start lacks it, read the start's first lines.
    a=$(printf '%s\n' "$j" | grep -a -e 'non-default args: ' | tail -n 1)
    if [ -z "$a" ] && [ -z "$lf" ] && [ -n "$inv" ]; then
      a=$(jn "_SYSTEMD_INVOCATION_ID=$inv" | head -n "$AS" | grep -a -e 'non-default args: ' | tail -n 1)
      if [ -z "$a" ] && [ -n "$S" ]; then
        a=$($S journalctl "_SYSTEMD_INVOCATION_ID=$inv" -o cat -a --no-pager 2>/dev/null | head -n "$AS" |
            grep -a -e 'non-default args: ' | tail -n 1)
      fi
    fi
    echo "$M vargs"; printf '%s' "$a" | b64
  fi
  if [ -n "$pid" ] && [ "$pid" != 0 ]; then
    rdsec "/proc/$pid/cmdline" cmdline
    rdsec "/proc/$pid/environ" environ
    srv=''; procs "$pid" "$(printf '%s\n' "$sh_" | sed -n 's/^ControlGroup=//p')"
    if [ -z "$url" ]; then
      # The port is on the server's command line: the main process's, a child's when the main one is a
      # wrapper, else the one vLLM logged.
      up=$pid
      if [ -n "$srv" ] && ! tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -e ' serve ' -e 'vllm\.entrypoints'
      then up=$srv; fi
      url=$(derive_url "$up" "$(printf '%s' "$a" | sed -n "s/.*'port': \([0-9][0-9]*\).*/\1/p")")
    fi
  fi
  if [ -n "$url" ]; then
    echo "$M url $url"
    h=$(curl -s -o /dev/null -w '%{http_code}' --connect-timeout "$HT" --max-time "$HT" "$url/health" 2>/dev/null)
    echo "$M health rc=$? code=$h"
    case $h in 2*|5*)
      v=$(get "$url/version"); echo "$M version rc=$?"; printf '%s' "$v" | b64
      if [ -n "$ak" ]; then
        # printf is a shell builtin and curl reads the header from stdin: the key is in no argv.
        m=$(printf 'Authorization: Bearer %s\n' "$ak" | curl -s --connect-timeout "$HT" --max-time "$HT" \
            -H @- -w '\n%{http_code}' "$url/v1/models" 2>/dev/null); r=$?
        echo "$M models rc=$r key=1"; printf '%s' "$m" | b64
      else
        # Asked without a key too: the model vLLM loaded and its max_model_len are a second source.
        m=$(get "$url/v1/models"); r=$?; echo "$M models rc=$r key=0"; printf '%s' "$m" | b64
      fi
      n=0; while [ "$n" -lt "$MS" ]; do
        [ "$n" -gt 0 ] && sleep "$MI"
        t=$(date +%s.%N); m=$(get "$url/metrics"); r=$?
        if [ "$MF" = 1 ]; then m=$(printf '%s\n' "$m" | grep -E -- "$MFR"); fi
        echo "$M metrics rc=$r t=$t"; printf '%s' "$m" | b64
        n=$((n+1))
      done;;
    esac
  fi
  if [ "$LL" -gt 0 ]; then
    if [ -n "$lf" ]; then j=$(tail -n "$LL" -- "$lf" 2>/dev/null || $S tail -n "$LL" -- "$lf" 2>/dev/null)
    else j=$(journalctl -u "$u" -o short-iso -a --no-pager -n "$LL" 2>/dev/null)
      if [ -z "$j" ] && [ -n "$S" ]; then j=$($S journalctl -u "$u" -o short-iso -a --no-pager -n "$LL" 2>/dev/null); fi
    fi
    echo "$M logs"; printf '%s' "$j" | b64
  fi
  if [ -n "$bd" ]; then
    case $bd in "~/"*) bd="$HOME/${bd#\~/}";; esac
    echo "$M bench dir=$bd"
    ls -t -- "$bd"/*.json 2>/dev/null | head -n 60 | while IFS= read -r f; do
      echo "$M benchfile path=$f"; grep -oE "\"($BK)\": ?(\"[^\"]*\"|[-0-9.eE+]+|null)" -- "$f" 2>/dev/null
    done
  fi
}
discover() {
  us=$( { systemctl list-units --type=service --all --plain --no-legend --no-pager 2>/dev/null | awk '{print $1}'
          systemctl list-unit-files --type=service --no-legend --no-pager 2>/dev/null | awk '{print $1}'; } |
        grep -v '@\.service$' | sort -u)
  [ -n "$us" ] || return 0
  # Running vLLM processes, whatever launched them: vLLM's name, the VLLM:: titles it gives its engine
  # and workers, or a serve subcommand with vLLM-only flags. The pattern travels in the environment, not
  # in argv, and this probe's own processes (their text holds the marker) are left out.
  hp=$(head -c 4096 -- /dev/null /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | DP="$DPAT" MK="$M" awk '
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


def build_script(targets: list[ProbeTarget], options: ProbeOptions) -> str:
    """The remote script for ``targets`` (or unit discovery when ``options.discover``)."""
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
        _HELPERS,
        f"PROPS={_q(SHOW_PROPERTIES)}; BK={_q(BENCH_KEYS)}",
        f"HT={options.http_timeout_s:g}; MS={options.metrics_samples}; MI={options.metrics_interval_s:g}",
        f"JL={options.journal_lines}; LL={options.log_lines}; JS={max(JOURNAL_SCAN, options.journal_lines)}",
        f"PN={MAX_PROCS}; CB={MAX_ARGV_BYTES}; AS={ARGS_SCAN}",
        f"JF={_q(JOURNAL_FILTER)}; DPAT={_q(DISCOVER_PATTERN)}",
        f"MF={int(options.metrics_filter)}; MFR={_q(METRICS_FILTER)}",
        "main() {",
        'echo "$M node now=$(date +%s) tz=$(date +%z) uid=$(id -u) host=$(hostname 2>/dev/null)"',
    ]
    if options.gpus:
        lines += [
            "g=$(nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,"
            "temperature.gpu,power.draw --format=csv,noheader,nounits 2>&1); r=$?",
            'echo "$M gpus rc=$r"; printf \'%s\\n\' "$g"',
            "a=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid "
            "--format=csv,noheader,nounits 2>&1); r=$?",
            'echo "$M gpu-apps rc=$r"; printf \'%s\\n\' "$a"',
            # The process tree tells a running service's GPU workers from leftovers of a crash.
            'echo "$M ps"; ps -eo pid=,ppid= 2>/dev/null',
        ]
    for i, t in enumerate(targets):
        bench = (t.bench_dir or "") if options.bench else ""
        key = ""
        if t.models:
            # One line of stdin per such target (see stdin_for): read into a shell variable, no argv.
            lines.append(f"IFS= read -r AK{i} || AK{i}=''")
            key = f' "$AK{i}"'
        lines.append(f"pu {_q(t.unit)} {_q(t.api_url or '')} {_q(t.log_file or '')} {_q(bench)}{key}")
    if options.discover:
        lines += [
            'found=$(discover); echo "$M discovered $(echo $found)"',
            'for u in $found; do pu "$u" "" "" ""; done',
        ]
    lines.append('echo "$M end"')
    # Written at once: each small write would otherwise travel as its own SSH packet, and the bot's
    # per-packet cost (decrypt, parse, in Python) was most of its CPU per question.
    lines += ["}", 'o=$(main); printf \'%s\\n\' "$o"']
    return "\n".join(lines) + "\n"


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
    """The command line sent over SSH: the script run by ``sh`` whatever the login shell is."""
    return "sh -c " + shlex.quote(script)


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


def parse_output(stdout: str) -> NodeRaw:
    """Split the probe's output into typed, decoded sections."""
    node = NodeRaw()
    unit: UnitRaw | None = None
    section: tuple[str, dict[str, str]] | None = None
    body: list[str] = []

    def flush() -> None:
        nonlocal section, body
        if section is None:
            body = []
            return
        name, kv = section
        text = "\n".join(body)
        if name == "gpus":
            node.gpus_rc, node.gpus = _int(kv.get("rc")), text
        elif name == "gpu-apps":
            node.gpu_apps_rc, node.gpu_apps = _int(kv.get("rc")), text
        elif name == "ps":
            for row in body:
                parts = row.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    node.parents[int(parts[0])] = int(parts[1])
        elif unit is not None:
            if name == "show":
                unit.show_rc, unit.show = _int(kv.get("rc")), text
            elif name == "cat":
                unit.cat_rc, unit.cat = _int(kv.get("rc")), _b64(text).decode("utf-8", "replace")
            elif name in ("cmdline", "environ", "file", "cenviron"):
                rc = _int(kv.get("rc"), 1)
                rf = ReadFile(path=kv.get("path", ""), rc=rc, data=_b64(text) if rc == 0 else None)
                if name == "file":
                    unit.files[rf.path] = rf
                elif name == "cmdline":
                    unit.cmdline = rf
                elif name == "cenviron":
                    unit.child_environ = rf
                else:
                    unit.environ = rf
            elif name == "procs":
                unit.procs_src = kv.get("src") or None
                for row in body:
                    parts = row.split(" ", 2)
                    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                        unit.procs.append(ProcRow(pid=int(parts[0]), ppid=int(parts[1]),
                                                  comm=parts[2] if len(parts) > 2 else ""))
            elif name == "argvs":
                _attach_argvs(unit, _b64(text))
            elif name == "vargs":
                unit.vargs = _b64(text).decode("utf-8", "replace") or None
            elif name == "version":
                decoded = _b64(text).decode("utf-8", "replace")
                unit.version = _http(f"{unit.url}/version", _int(kv.get("rc")), decoded)
            elif name == "models":
                decoded = _b64(text).decode("utf-8", "replace")
                unit.models = _http(f"{unit.url}/v1/models", _int(kv.get("rc")), decoded)
                unit.models_keyed = kv.get("key", "1") == "1"
            elif name == "metrics":
                probe = _http(f"{unit.url}/metrics", _int(kv.get("rc")), _b64(text).decode("utf-8", "replace"))
                unit.metrics.append(MetricsScrape(at=float(kv.get("t", "0") or 0), probe=probe))
            elif name == "journal":
                unit.journal, unit.journal_src = _b64(text).decode("utf-8", "replace"), kv.get("src")
            elif name == "logs":
                unit.logs = _b64(text).decode("utf-8", "replace")
            elif name == "benchfile":
                unit.bench_files[kv.get("path", "")] = text
        section, body = None, []

    for line in stdout.split("\n"):
        if not line.startswith(MARK):
            body.append(line)
            continue
        flush()
        head, _, rest = line[len(MARK) + 1 :].partition(" ")
        if head == "node":
            kv = _kv(rest)
            if kv.get("now", "").isdigit():
                node.now = datetime.fromtimestamp(int(kv["now"]), UTC)
            node.tz = kv.get("tz") or "+0000"
            node.uid = _int(kv.get("uid"), -1)
            node.host = kv.get("host", "")
        elif head == "unit":
            unit = UnitRaw(unit=rest.strip())
            node.units.append(unit)
        elif head == "url" and unit is not None:
            unit.url = rest.strip()
        elif head == "health" and unit is not None:
            kv = _kv(rest)
            unit.health = HttpProbe(
                url=f"{unit.url}/health",
                status=_int(kv.get("code"), 0) or None,
                curl_exit=_int(kv.get("rc")),
            )
        elif head == "bench" and unit is not None:
            unit.bench_dir = _kv(rest).get("dir")
        elif head == "discovered":
            node.discovered = rest.split()
        elif head == "end":
            node.complete = True
        else:
            kv = _kv(rest)
            if head in ("file", "cmdline", "environ", "benchfile", "cenviron"):
                # Paths may contain spaces: everything after "path=" is the path.
                _, _, path = rest.partition("path=")
                kv["path"] = path
            section = (head, kv)
    flush()
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
