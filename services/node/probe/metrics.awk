# The "health" and "metrics" sections from one curl's output (each transfer's body, then its
# "CODE EXIT" -w line) followed by a line of curl's own exit status. Run as
#   SCRAPE_TIME=T awk -v with_health=0|1 -v filtered=0|1 "$METRICS_AWK"
# with_health=1: the first line is /health's (its body went to /dev/null), and /metrics counts only when
# /health said 2xx or 5xx. filtered=1: only the lines of METRICS_FILTER (the watcher's chart samples) and
# the status line are kept, the histograms that are most of the body are not sent; filtered=2: likewise with
# METRICS_READ_FILTER (the lines an answer reads).
{ lines[NR] = $0 }
END {
  curl_status = lines[NR]; first = 1
  pattern = (filtered == 2) ? ENVIRON["METRICS_READ_FILTER"] : ENVIRON["METRICS_FILTER"]
  if (with_health) {
    code = ""; status = curl_status
    if (NR >= 2) {
      fields = split(lines[1], field, " "); code = field[1]
      status = (fields >= 2) ? field[2] : (code != "000" ? 0 : curl_status)
    }
    printf "\n%s health rc=%s code=%s\n", ENVIRON["MARKER"], status, code
    if (code !~ /^[25]/) exit
    first = 2
  }
  if (NR < first + 2) exit
  fields = split(lines[NR - 1], field, " "); code = field[1]; status = (fields >= 2) ? field[2] : curl_status
  printf "\n%s metrics rc=%s t=%s\n", ENVIRON["MARKER"], status, ENVIRON["SCRAPE_TIME"]
  body = ""; kept = 0
  for (i = first; i <= NR - 2; i++)
    if (!filtered || lines[i] ~ pattern) body = body (kept++ ? "\n" : "") lines[i]
  if (filtered) printf "%s%s%s", body, (kept ? "\n" : ""), code
  else printf "%s\n%s", body, code
}
