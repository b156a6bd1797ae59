# shellcheck shell=sh
# Everything about one unit: probe_unit, once per configured unit (the generated probe_units) and for each
# unit discovery found, and the sections it is made of. They share the unit's facts in plain variables.

# probe_unit UNIT URL LOG_FILE BENCH_DIR [API_KEY]: every section of one unit. URL, LOG_FILE and BENCH_DIR
# come from the config (empty: not configured); the API key, when the bot holds one, came on stdin. Each
# stream (the plain one and the base64 one) names the unit its sections belong to.
probe_unit() {
  unit=$1; url=$2; log_file=$3; bench_dir=$4; api_key=${5:-}
  key_flag=0; [ -z "$api_key" ] || key_flag=1
  section "unit $unit"; plain_section "unit $unit"
  show_section
  main_pid_live=0; [ -z "$main_pid" ] || [ "$main_pid" = 0 ] || main_pid_live=1
  command_line=''; vllm_args=''
  if [ $main_pid_live = 1 ] && { [ "$ASK_SETTINGS" = 1 ] || [ -z "$url" ]; }; then
    command_line=$(tr '\0' '\n' < "/proc/$main_pid/cmdline" 2>/dev/null)
  fi
  [ "$ASK_SETTINGS" = 0 ] || unit_file_sections
  list_bench_files
  [ "$JOURNAL_LINES" -eq 0 ] || journal_sections
  [ $main_pid_live = 0 ] || main_process_sections
  [ -z "$url" ] || http_sections
  [ "$LOG_LINES" -eq 0 ] || log_section
  [ -z "$bench_dir" ] || BENCH_DIR=$bench_dir BENCH_FILES=$bench_files awk "$BENCH_AWK BEGIN { bench() }"
}

# show_section: systemctl show, sent plain, and what the probe reads from it, read by the shell itself (from
# the variable: `read` would take a byte per system call): MainPID, InvocationID, ControlGroup, and the
# files the unit reads (EnvironmentFiles=, ExecStart='s --config and --env-file) in files_to_read.
show_section() {
  show=$(systemctl show -p "$SHOW_PROPERTIES" -- "$unit" 2>&1); show_status=$?
  plain_section "show rc=$show_status"; printf '%s\n' "$show" >&3
  main_pid='' invocation_id='' unit_cgroup='' files_to_read='' previous_word='' lines_left=$show$NL
  while [ -n "$lines_left" ]; do
    line=${lines_left%%"$NL"*}; lines_left=${lines_left#*"$NL"}
    case $line in
      MainPID=*) main_pid=${line#MainPID=};;
      InvocationID=*) invocation_id=${line#InvocationID=};;
      ControlGroup=*) unit_cgroup=${line#ControlGroup=};;
      EnvironmentFiles=*' (ignore_errors='*')')
        value=${line#EnvironmentFiles=}; files_to_read="$files_to_read${value%" (ignore_errors="*}$NL";;
      'ExecStart={ path='*' ; argv[]='*' ; ignore_errors='*)
        value=${line#'ExecStart={ path='}
        # A path with " ; " in it: the fields cannot be told apart, the main process's argv will tell.
        case ${value%%' ; argv[]='*} in *';'*) continue;; esac
        value=${value#*' ; argv[]='}; value=${value% ; ignore_errors=*}' '
        while [ -n "$value" ]; do note_file_arg "${value%% *}"; value=${value#* }; done;;
    esac
  done
}

# note_file_arg WORD: one word of a command line, in order (previous_word: the one before); a file named by
# --config or --env-file is added to files_to_read.
note_file_arg() {
  word=$1
  case $previous_word in --config|--env-file) files_to_read="$files_to_read$word$NL";; esac
  case $word in --env-file=*) word=${word#--env-file=}; files_to_read="$files_to_read$word$NL";; esac
  previous_word=$word
}

# unit_file_sections: systemctl cat (the unit as written, drop-ins included), then each file the unit and
# its command read, once.
unit_file_sections() {
  section cat; systemctl cat -- "$unit" 2>&1; section "rc $?"
  if [ $main_pid_live = 1 ]; then
    previous_word=''; words_left=$command_line$NL
    while [ -n "$words_left" ]; do note_file_arg "${words_left%%"$NL"*}"; words_left=${words_left#*"$NL"}; done
  fi
  files_seen=$NL
  while [ -n "$files_to_read" ]; do
    file=${files_to_read%%"$NL"*}; files_to_read=${files_to_read#*"$NL"}
    case $files_seen in *"$NL$file$NL"*) continue;; esac
    files_seen="$files_seen$file$NL"; [ -z "$file" ] || read_file "$file" file
  done
}

# list_bench_files: the benchmark result files of bench_dir ("~/": the login user's home), newest first, in
# bench_files.
list_bench_files() {
  bench_files=''
  [ -n "$bench_dir" ] || return 0
  case $bench_dir in \~/*) bench_dir="$HOME/${bench_dir#\~/}";; esac
  bench_files=$(ls -t -- "$bench_dir"/*.json 2>/dev/null)
}

# journal_sections: the "journal" section (the lines of the current start the parsers read, filtered on
# the node by JOURNAL_AWK, from the log file when the unit writes one) with the benchmark sections riding
# along, then "vargs": vLLM's "non-default args" line, its own list of the arguments it got (a second
# source, and a cross-check). Sets vllm_args.
journal_sections() {
  if [ -n "$log_file" ]; then
    journal_source='file'
    filtered=$( { tail -n "$JOURNAL_SCAN" -- "$log_file" 2>/dev/null || as_root tail -n "$JOURNAL_SCAN" -- "$log_file" 2>/dev/null; } |
                BENCH_DIR=$bench_dir BENCH_FILES=$bench_files awk -v newest="$JOURNAL_LINES" "$BENCH_AWK$JOURNAL_AWK")
  else
    if [ -n "$invocation_id" ]; then journal_source='invocation'; set -- "_SYSTEMD_INVOCATION_ID=$invocation_id"
    else journal_source='unit'; set -- -u "$unit"; fi
    filtered=$(journalctl "$@" -n "$JOURNAL_SCAN" -o cat -a --no-pager 2>/dev/null |
               BENCH_DIR=$bench_dir BENCH_FILES=$bench_files awk -v newest="$JOURNAL_LINES" "$BENCH_AWK$JOURNAL_AWK")
    case $filtered in E|E"$NL"*)
      [ "$is_root" = 1 ] ||
        filtered=$(sudo -n journalctl "$@" -n "$JOURNAL_SCAN" -o cat -a --no-pager 2>/dev/null |
                   BENCH_DIR=$bench_dir BENCH_FILES=$bench_files awk -v newest="$JOURNAL_LINES" "$BENCH_AWK$JOURNAL_AWK");;
    esac
  fi
  # The benchmark sections came with the journal's.
  bench_dir=''
  vllm_args=${filtered%%"$NL"*}; vllm_args=${vllm_args#[AE]}
  case $filtered in *"$NL"*) filtered=${filtered#*"$NL"};; *) filtered='';; esac
  section "journal src=$journal_source"; [ -z "$filtered" ] || printf '%s\n' "$filtered"
  # The line comes right after vLLM's banner: when the scanned tail of a long-running start lacks it, read
  # the start's first lines.
  if [ -z "$vllm_args" ] && [ -z "$log_file" ] && [ -n "$invocation_id" ]; then
    vllm_args=$(journalctl "_SYSTEMD_INVOCATION_ID=$invocation_id" -o cat -a --no-pager 2>/dev/null | first_args_line)
    if [ -z "$vllm_args" ] && [ "$is_root" = 0 ]; then
      vllm_args=$(sudo -n journalctl "_SYSTEMD_INVOCATION_ID=$invocation_id" -o cat -a --no-pager 2>/dev/null |
                  first_args_line)
    fi
  fi
  section vargs; printf '%s' "$vllm_args"
}

# first_args_line: vLLM's "non-default args" line among the first ARGS_SCAN lines of a start on stdin.
first_args_line() {
  awk -v scan="$ARGS_SCAN" 'NR > scan { exit } index($0, "non-default args: ") { line = $0 } END { if (line != "") print line }'
}

# main_process_sections: the main process's argv and environment (the truth of what runs) and the unit's
# processes (a wrapper's child may be the server) when settings are asked; when the config names no URL,
# the URL the server listens on, from its command line (the processes are read for it when the main
# process does not look like a server).
main_process_sections() {
  server_pid=''; server_command=0
  if [ -z "$url" ] && is_server_command; then server_command=1; fi
  if [ "$ASK_SETTINGS" = 1 ]; then
    read_file "/proc/$main_pid/cmdline" cmdline
    read_file "/proc/$main_pid/environ" environ
    unit_processes "$main_pid" "$unit_cgroup" "$command_line"
  elif [ -z "$url" ] && [ $server_command = 0 ]; then
    unit_processes "$main_pid" "$unit_cgroup" "$command_line"
  fi
  [ -n "$url" ] || find_url
}

# is_server_command: does $command_line look like a vLLM server's (a "serve" word, vllm.entrypoints)?
is_server_command() {
  joined=''; words_left=$command_line$NL
  while [ -n "$words_left" ]; do joined="$joined${words_left%%"$NL"*} "; words_left=${words_left#*"$NL"}; done
  case $joined in *' serve '*|*vllm.entrypoints*) return 0;; esac
  return 1
}

# find_url: the URL of the server, from its command line (a wrapper's child's, when the main process is
# not the server), else from the port vLLM logged, else vLLM's default.
find_url() {
  if [ $server_command = 0 ] && [ -n "$server_pid" ]; then
    command_line=$(tr '\0' '\n' < "/proc/$server_pid/cmdline" 2>/dev/null)
  fi
  logged_port=''; args_left=$vllm_args
  while :; do
    case $args_left in *"'port': "[0-9]*) ;; *) break;; esac
    after=${args_left##*"'port': "}; logged_port=${after%%[!0-9]*}
    [ -z "$logged_port" ] || break
    args_left=${args_left%"'port': "*}
  done
  url_of_command "$logged_port"
}

# url_of_command [LOGGED_PORT]: url for the vLLM command line $command_line (one word a line): --port and
# --host, docker's -p/--publish (the host's side of the port vLLM listens on), else LOGGED_PORT, else 8000;
# 0.0.0.0 and :: are reached on 127.0.0.1.
url_of_command() {
  port='' host='' published=$NL previous_word='' words_left=$command_line$NL
  while [ -n "$words_left" ]; do
    word=${words_left%%"$NL"*}; words_left=${words_left#*"$NL"}
    case $previous_word in --port) port=$word;; esac
    case $word in --port=*) word=${word#--port=}; port=$word;; esac
    case $previous_word in --host) host=$word;; esac
    case $word in --host=*) word=${word#--host=}; host=$word;; esac
    case $previous_word in
      -p|--publish) case $word in *:*) host_side=${word%:*}; published="$NL${word##*:}=${host_side##*:}$published";; esac;;
    esac
    previous_word=$word
  done
  [ -n "$port" ] || port=${1-}
  [ -n "$port" ] || port=8000
  case $published in *"$NL$port="*) host_side=${published#*"$NL$port="}; port=${host_side%%"$NL"*};; esac
  case $host in ''|0.0.0.0|::|'[::]') host=127.0.0.1;; esac
  url="http://$host:$port"
}

# http_sections: what the unit's server says: "url", /health, and as the question asks /metrics
# (METRICS_SAMPLES scrapes, METRICS_INTERVAL apart), /version and /v1/models, in as few curls as possible.
http_sections() {
  section "url $url"
  if [ "$METRICS_SAMPLES" = 1 ] && [ "$ASK_API_INFO" = 0 ]; then
    # The watcher's poll: /health and the one /metrics scrape in one curl.
    scrape_metrics 1
    return 0
  fi
  # /health, the first /metrics scrape (unless filtered), /version and /v1/models: one curl.
  scraped=0; set --
  if [ "$METRICS_SAMPLES" -gt 0 ] && [ "$FILTER_METRICS" = 0 ]; then set -- metrics; scraped=1; fi
  [ "$ASK_API_INFO" = 0 ] || set -- "$@" version models
  health_then "$@"
  case $health_code in 2*|5*) ;; *) return 0;; esac
  while [ "$scraped" -lt "$METRICS_SAMPLES" ]; do
    [ "$scraped" -eq 0 ] || sleep "$METRICS_INTERVAL"
    if [ "$FILTER_METRICS" != 0 ]; then scrape_metrics 0; else http_get metrics; fi
    scraped=$((scraped + 1))
  done
}

# log_section: the unit's newest LOG_LINES lines as they are (the journal's with their times, or the log
# file's).
log_section() {
  if [ -n "$log_file" ]; then
    log_lines=$(tail -n "$LOG_LINES" -- "$log_file" 2>/dev/null || as_root tail -n "$LOG_LINES" -- "$log_file" 2>/dev/null)
  else
    log_lines=$(journalctl -u "$unit" -o short-iso -a --no-pager -n "$LOG_LINES" 2>/dev/null)
    if [ -z "$log_lines" ] && [ "$is_root" = 0 ]; then
      log_lines=$(sudo -n journalctl -u "$unit" -o short-iso -a --no-pager -n "$LOG_LINES" 2>/dev/null)
    fi
  fi
  section logs; printf '%s' "$log_lines"
}
