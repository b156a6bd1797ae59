# bench(): the "bench" section of BENCH_DIR, then a "benchfile" section for each of its newest 60 result
# files (BENCH_FILES: `ls -t`, one a line) holding only the summary values the parser reads (each match of
# BENCH_PATTERN; services/parse/bench.py). Called by the journal's awk when the journal is read anyway,
# else on its own: awk "$BENCH_AWK BEGIN { bench() }".
function bench(   count, files, i, line, pattern) {
  printf "\n%s bench dir=%s\n", ENVIRON["MARKER"], ENVIRON["BENCH_DIR"]
  count = split(ENVIRON["BENCH_FILES"], files, "\n"); pattern = ENVIRON["BENCH_PATTERN"]
  for (i = 1; i <= count && i <= 60; i++) {
    printf "\n%s benchfile path=%s\n", ENVIRON["MARKER"], files[i]
    while ((getline line < files[i]) > 0)
      while (match(line, pattern)) {
        print substr(line, RSTART, RLENGTH)
        line = substr(line, RSTART + RLENGTH)
      }
    close(files[i])
  }
}
