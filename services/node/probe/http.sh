# shellcheck shell=sh
# HTTP from the node to the unit's server ($url), several URLs in one curl (--next). Each transfer's -w
# line follows its body: "CODE EXIT SIZE URL" (EXIT: curl's exit code for that transfer, empty before curl
# 7.75; SIZE: the body's bytes, so the parser cuts the bodies from the end and no body can pass for another
# or for a -w line). The API key, when the bot holds one ($api_key), reaches curl on stdin (-H @-) for
# /v1/models only: it is in no argv.
TRANSFER_LINE='\n%{http_code} %{exitcode} %{size_download} %{url_effective}\n'

# fetch HOW NAME...: one curl for NAME... ("metrics", "version", "models"), each transfer on its own. HOW
# "stream": what curl writes goes out as it is. HOW "after-health": /health comes first (its body to
# /dev/null, its own "CODE EXIT" line; --fail-early ends the curl at a /health without answer), and what
# curl writes is kept in $fetched. Sets fetch_status: curl's exit status.
fetch() {
  how=$1; shift; names=$*
  if [ "$how" = after-health ]; then
    set -- -s --fail-early --connect-timeout "$HTTP_TIMEOUT" --max-time "$HTTP_TIMEOUT" -o /dev/null \
      -w '%{http_code} %{exitcode}\n' "$url/health"
  else
    set --
  fi
  # shellcheck disable=SC2086 # this script's own words, split on purpose
  for name in $names; do
    [ $# -eq 0 ] || set -- "$@" --next
    set -- "$@" -s --connect-timeout "$HTTP_TIMEOUT" --max-time "$HTTP_TIMEOUT" -w "$TRANSFER_LINE"
    case $name in
      metrics) set -- "$@" "$url/metrics";;
      version) set -- "$@" "$url/version";;
      models) if [ -n "$api_key" ]; then set -- "$@" -H @-; fi; set -- "$@" "$url/v1/models";;
    esac
  done
  # Kept: a command substitution of curl itself (no shell process in between).
  if [ "$how" = after-health ]; then
    if [ -n "$api_key" ]; then fetched=$(printf 'Authorization: Bearer %s\n' "$api_key" | curl "$@" 2>/dev/null)
    else fetched=$(curl "$@" 2>/dev/null </dev/null); fi
  elif [ -n "$api_key" ]; then printf 'Authorization: Bearer %s\n' "$api_key" | curl "$@" 2>/dev/null
  else curl "$@" 2>/dev/null </dev/null; fi
  fetch_status=$?
}

# scrape_time_for NAME...: when a /metrics scrape is among NAME..., its time (the sample's), in scrape_time.
scrape_time_for() {
  scrape_time=''
  case " $* " in *' metrics '*) scrape_time=$(date +%s.%N);; esac
}

# http_get NAME...: an "http" section with one curl's transfers of NAME..., and its "rc" section.
http_get() {
  scrape_time_for "$@"
  section "http t=$scrape_time key=$key_flag get=$*"
  fetch stream "$@"
  section "rc $fetch_status"
}

# health_then NAME...: the "health" section, and NAME... asked in the same curl: they count only when
# /health said 2xx or 5xx (as asking them only then did). A transfer that --fail-early skipped (one before
# it got no answer) is asked again on its own. Sets health_code.
health_then() {
  scrape_time_for "$@"
  fetch after-health "$@"
  first_line=${fetched%%"$NL"*}; health_code=${first_line%% *}
  health_exit=${first_line#"$health_code"}; health_exit=${health_exit# }
  if [ -z "$health_exit" ]; then
    # curl before 7.75 writes no exit code: an answer means it went through.
    if [ -n "$health_code" ] && [ "$health_code" != 000 ]; then health_exit=0; else health_exit=$fetch_status; fi
  fi
  section "health rc=$health_exit code=$health_code"
  case $health_code in 2*|5*) ;; *) return 0;; esac
  [ $# -gt 0 ] || return 0
  case $fetched in *"$NL"*) fetched=${fetched#*"$NL"}$NL;; *) fetched='';; esac
  section "http t=$scrape_time key=$key_flag get=$*"; printf '%s' "$fetched"; section "rc $fetch_status"
  [ "$fetch_status" = 0 ] && return 0
  # The last -w line names the transfer that failed; the ones after it were skipped.
  last_line=${fetched%"$NL"}; last_line=${last_line##*"$NL"}; skipped=''; failed_seen=0
  for name do
    [ $failed_seen = 0 ] || skipped="$skipped $name"
    case $name:$last_line in
      metrics:*" $url/metrics"|version:*" $url/version"|models:*" $url/v1/models") failed_seen=1;;
    esac
  done
  # shellcheck disable=SC2086 # this script's own words, split on purpose
  [ $failed_seen = 0 ] || [ -z "$skipped" ] || http_get $skipped
  return 0
}

# scrape_metrics WITH_HEALTH: one /metrics scrape made into its section by METRICS_AWK; with WITH_HEALTH=1,
# /health first in the same curl (--fail-early ends it at a /health without answer), and its section.
scrape_metrics() {
  with_health=$1; scrape_time=$(date +%s.%N)
  if [ "$with_health" = 1 ]; then
    set -- -s --fail-early --connect-timeout "$HTTP_TIMEOUT" --max-time "$HTTP_TIMEOUT" -o /dev/null \
      -w '%{http_code} %{exitcode}\n' "$url/health" --next
  else
    set --
  fi
  { curl "$@" -s --connect-timeout "$HTTP_TIMEOUT" --max-time "$HTTP_TIMEOUT" -w '\n%{http_code} %{exitcode}\n' \
      "$url/metrics" 2>/dev/null </dev/null
    echo "$?"; } |
    SCRAPE_TIME=$scrape_time awk -v with_health="$with_health" -v filtered="$FILTER_METRICS" "$METRICS_AWK"
}
