# The journal lines the parsers read (services/parse/vllm_log.py), from the current start's journal (or
# the unit's log file) on stdin: the lines matching JOURNAL_FILTER, of the repetitive ones (shard progress,
# periodic stats) only the newest 3 so that every other marker stays in order (the phase is read from the
# last marker), then the newest `newest` of those. A busy server's access-log lines thus neither cost
# transfer and parsing nor push the phase markers out of the window.
# The first line out is "A" and vLLM's last "non-default args" line, or "E" when the journal said nothing
# or only "-- No entries --" (what a user outside systemd-journal sees, with exit status 0).
# The benchmark sections (bench.awk) follow when BENCH_DIR is set. Run as:
#   awk -v newest=N "$BENCH_AWK$JOURNAL_AWK"
$0 != "" { if (++nonempty == 1 && NR == 1 && $0 == "-- No entries --") no_entries = 1 }
index($0, "non-default args: ") { args_line = $0 }
$0 ~ ENVIRON["JOURNAL_FILTER"] {
  matched[++count] = $0
  if (index($0, "Completed |")) progress_lines++
  else if (index($0, "throughput: ")) stats_lines++
}
END {
  if (nonempty == 0 || (nonempty == 1 && no_entries)) print "E"
  else {
    print "A" args_line
    progress = 0; stats = 0; kept = 0
    for (i = 1; i <= count; i++) {
      line = matched[i]
      if (index(line, "Completed |")) { if (++progress <= progress_lines - 3) continue }
      else if (index(line, "throughput: ")) { if (++stats <= stats_lines - 3) continue }
      keep[++kept] = line
    }
    for (i = (kept > newest ? kept - newest + 1 : 1); i <= kept; i++) print keep[i]
  }
  if (ENVIRON["BENCH_DIR"] != "") bench()
}
