# shellcheck shell=sh
# The answer: every section of the question, in order, written at once. Python ends the script with the
# question's settings, read_api_keys and probe_units, and answer_once or answer_each_line.

# node_section: the node's clock and time zone, the login user, the host name (plain).
node_section() {
  clock=$(date '+%s %z')
  plain_section "node now=${clock% *} tz=${clock#* } uid=$login_uid host=$(hostname 2>/dev/null)"
}

# gpu_sections: nvidia-smi's GPUs and compute processes (plain). The process tree tells a running
# service's GPU workers from a crash's leftovers: the GPU processes' ancestry is written by the first
# process awk that runs (processes.awk), or at the end of the answer.
gpu_sections() {
  gpus=$(nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw \
    --format=csv,noheader,nounits 2>&1)
  gpus_status=$?
  plain_section "gpus rc=$gpus_status"; printf '%s\n' "$gpus" >&3
  gpu_apps=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits 2>&1)
  gpu_apps_status=$?
  plain_section "gpu-apps rc=$gpu_apps_status"; printf '%s\n' "$gpu_apps" >&3
  gpu_ancestry_pending=$gpu_apps
}

# main: the answer's sections. Plain ones go to fd 3; the others to stdout (see answer).
main() {
  # First: nothing else may read stdin before.
  read_api_keys
  node_section
  [ "$ASK_GPUS" = 0 ] || gpu_sections
  probe_units
  [ "$DISCOVER" = 0 ] || discover_and_probe
  [ -z "$gpu_ancestry_pending" ] || GPU_APPS=$gpu_ancestry_pending awk -v mode=ancestry "$PROCESSES_AWK"
  section end
}

# answer: one answer in answer_text: the plain sections, then one line "<MARK_BASE> b64 <base64>" holding
# every other section (one base64 process), then a plain "<MARK_BASE> end" saying it is complete. It is
# written at once, in one write, by the caller: each small write would travel as its own SSH packet, and
# the bot's cost per packet (decrypt, parse, in Python) was most of its CPU per question.
answer() {
  answer_text=$( { encoded=$(main 3>&4 | base64 -w0); printf '%s b64 %s\n%s end' "$MARK_BASE" "$encoded" "$MARK_BASE"; } 4>&1 )
}

# answer_once: the one-shot probe.
answer_once() {
  answer
  printf '%s' "$answer_text$NL"
}

# answer_each_line: a persistent probe session (the watcher's): one answer per line read from stdin (the
# bot's trigger, read and never used), each with a fresh marker value, followed by the line
# "<marker> done": no byte inside an answer can end it early. The probe reads /dev/null, never the trigger
# stream. At the end of stdin (the bot closed the channel) the loop ends, and so does the shell; in between
# it sits in read(2), costing the node nothing.
answer_each_line() {
  while IFS= read -r _; do
    new_marker
    answer </dev/null
    printf '%s' "$answer_text$NL$MARKER done$NL"
  done
}
