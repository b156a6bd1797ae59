# A unit's processes as "pid ppid comm" rows (unit_processes in processes.sh), and the node's "ps" section.
# Run as awk -v mode=MODE -v max=N [-v root=PID] "$PROCESSES_AWK" [/proc/PID...], MODE being
#   cgroup:   the first readable, non-empty cgroup.procs of UNIT_CGROUP under CGROUP_ROOT (cgroup v2; v1's
#             systemd hierarchy; hybrid's unified one): its `max` lowest PIDs, after a first line naming
#             the file read;
#   children: the process `root` and its descendants, breadth first (each one's children in PID text
#             order), from the "parent child" lines of CHILD_EDGES (the kernel's task/*/children files);
#   scan:     the same from the /proc/PID/stat of every PID given as an argument (a kernel without
#             children files);
#   ancestry: only the "ps" section.
# The tree modes print "ppid" first, then at most `max` rows. A process gone meanwhile is skipped.
# With GPU_APPS set (nvidia-smi's compute-apps rows: once per answer, with the first unit that reads its
# processes) it first writes the node's "ps" section to fd 3: "pid ppid" of each GPU process and of its
# ancestors, all that tells a running service's GPU workers from a crash's leftovers.

# "pid ppid comm" of a /proc/PID/stat line; comm may hold spaces and parens: it ends at the last ") ".
function stat_row(line,   open, close_at, step, comm, field) {
  open = index(line, " ("); close_at = 0
  while ((step = index(substr(line, close_at + 1), ") ")) > 0) close_at += step
  if (open < 2 || close_at <= open) return ""
  comm = substr(line, open + 2, close_at - open - 2); gsub(/[^A-Za-z0-9_.:@+-]/, "_", comm)
  split(substr(line, close_at + 2), field, " ")
  return substr(line, 1, open - 1) " " field[2] " " comm
}
function read_stat(pid,   file, line, row) {
  file = "/proc/" pid "/stat"; row = ""
  if ((getline line < file) > 0) row = stat_row(line)
  close(file)
  return row
}
function gpu_ancestry(   out, count, rows, i, pid, row, field, seen) {
  out = "/dev/fd/3"; printf "\n%s ps\n", ENVIRON["MARKER"] > out
  count = split(ENVIRON["GPU_APPS"], rows, "\n")
  for (i = 1; i <= count; i++) {
    pid = rows[i]; sub(/,.*/, "", pid)
    while (pid ~ /^[0-9]+$/ && pid + 0 > 0 && !(pid in seen) && (row = read_stat(pid)) != "") {
      seen[pid] = 1; split(row, field, " "); print pid, field[2] > out; pid = field[2]
    }
  }
  close(out)
}
# The `max` lowest PIDs of the first cgroup.procs that lists any (cgroup v2 lists them in no order).
function cgroup_rows(   file, i, count, line, pid, lowest, j, row) {
  file[1] = ENVIRON["CGROUP_ROOT"] ENVIRON["UNIT_CGROUP"] "/cgroup.procs"
  file[2] = ENVIRON["CGROUP_ROOT"] "/systemd" ENVIRON["UNIT_CGROUP"] "/cgroup.procs"
  file[3] = ENVIRON["CGROUP_ROOT"] "/unified" ENVIRON["UNIT_CGROUP"] "/cgroup.procs"
  for (i = 1; i <= 3; i++) {
    count = 0
    while ((getline line < file[i]) > 0) {
      if (line !~ /^[0-9]+$/) continue
      pid = line + 0
      if (count < max || pid < lowest[count]) {
        if (count < max) count++
        j = count; while (j > 1 && lowest[j - 1] > pid) { lowest[j] = lowest[j - 1]; j-- } lowest[j] = pid
      }
    }
    close(file[i])
    if (count > 0) {
      print file[i]
      for (j = 1; j <= count; j++) if ((row = read_stat(lowest[j])) != "") print row
      return
    }
  }
}
# children[pid]: " child child…" of each process, in PID text order, from CHILD_EDGES.
function children_from_edges(   count, edges, i, pair, pid, kids, kid, j, k) {
  count = split(ENVIRON["CHILD_EDGES"], edges, "\n")
  for (i = 1; i <= count; i++) if (split(edges[i], pair, " ") == 2) children[pair[1]] = children[pair[1]] " " pair[2]
  for (pid in children) {
    count = split(children[pid], kids, " ")
    for (j = 2; j <= count; j++) {
      kid = kids[j]; k = j
      while (k > 1 && (kids[k - 1] "") > (kid "")) { kids[k] = kids[k - 1]; k-- }
      kids[k] = kid
    }
    children[pid] = ""; for (j = 1; j <= count; j++) children[pid] = children[pid] " " kids[j]
  }
}
# children[pid] from every /proc/PID/stat named as an argument (in the glob's PID text order), and stat[pid]:
# each one's stat line (the parent follows the last ") ": state, ppid).
function children_from_scan(   i, file, line, field, open, pid) {
  for (i = 1; i < ARGC; i++) {
    file = ARGV[i] "/stat"
    if ((getline line < file) > 0 && match(line, /.*\) /) && (open = index(line, " (")) > 1) {
      split(substr(line, RLENGTH + 1, 40), field, " "); pid = substr(line, 1, open - 1)
      stat[pid] = line; children[field[2]] = children[field[2]] " " pid
    }
    close(file)
  }
}
# Breadth first from root, at most `max` rows.
function walk(   queue, head, tail, rows, pid, row, count, kids, i) {
  queue[1] = root; head = 1; tail = 1; rows = 0
  while (head <= tail && rows < max) {
    pid = queue[head++]
    if (mode == "children") row = read_stat(pid); else row = (pid in stat) ? stat_row(stat[pid]) : ""
    if (row != "") { print row; rows++ }
    count = split(children[pid], kids, " "); for (i = 1; i <= count; i++) queue[++tail] = kids[i]
  }
}
BEGIN {
  if (ENVIRON["GPU_APPS"] != "") gpu_ancestry()
  if (mode == "cgroup") cgroup_rows()
  else if (mode == "children" || mode == "scan") {
    print "ppid"
    if (mode == "children") children_from_edges(); else children_from_scan()
    walk()
  }
  exit
}
