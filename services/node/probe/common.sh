# shellcheck shell=sh
# What every part of the probe relies on: a predictable environment, the answer's marker, who we run as,
# and the writers of sections. The wire format is described in services/node/probe/__init__.py; Python
# puts the constants (MARK_BASE, the awk programs, …) before this file and the question's settings after.
set -u
# systemd's tools and everything else print plain, untranslated, unpaged text.
export LC_ALL=C SYSTEMD_COLORS=0 SYSTEMD_PAGER='' PAGER=cat
NL='
'
CGROUP_ROOT=/sys/fs/cgroup
# The GPU processes' rows until a process awk has written their ancestry (processes.awk).
gpu_ancestry_pending=''

# new_marker: this answer's section marker, "$MARK_BASE<random>", in MARKER (exported: awk reads it from its
# environment). The random part is read here, again for each answer of a persistent session, and is never
# on a command line (argv is world-readable in /proc; a process's environment and memory are not), so no
# byte on the node (a journal line, a file, an HTTP body, a process title) can forge a marker.
new_marker() {
  random_part=''
  read -r random_part 2>/dev/null </proc/sys/kernel/random/uuid
  # 60 random bits are plenty: one guess per answer, and no feedback.
  random_part=${random_part%-*-*}
  [ -n "$random_part" ] || random_part=$(od -An -N8 -tx1 /dev/urandom 2>/dev/null | tr -d ' \n')
  MARKER=$MARK_BASE$random_part
  export MARKER
}
new_marker

# The effective uid, from the shell's own status file (no process for `id -u`).
login_uid=''
while read -r field _ effective_uid _; do
  case $field in Uid:) login_uid=$effective_uid; break;; esac
done 2>/dev/null </proc/self/status
[ -n "$login_uid" ] || login_uid=$(id -u)
is_root=0; [ "$login_uid" != 0 ] || is_root=1

# as_root COMMAND...: COMMAND through `sudo -n`, for what the login user may not read (another user's
# /proc/PID/environ, a 0600 env file, the journal). sudo -n never prompts: without a sudoers rule it fails,
# and the bot says it fell back to the unit. As root there is nothing more to try: it fails.
as_root() { [ "$is_root" = 0 ] && sudo -n "$@"; }

# section HEAD: a section marker, on its own line, into the stream that goes out in base64 (contents that
# may be any bytes). plain_section HEAD: one on fd 3, which goes out as it is (systemd's and nvidia-smi's
# own text, numbers: UTF-8 whatever the node holds, and a third smaller than in base64). Whoever wrote
# before a marker ends with a newline of their own.
section() { printf '\n%s %s\n' "$MARKER" "$1"; }
plain_section() { printf '\n%s %s\n' "$MARKER" "$1" >&3; }

# read_file PATH NAME: a NAME section with PATH's bytes as they are, and its "rc" section. A file the login
# user cannot read comes through sudo -n with the base64 command the README's sudoers line names: such a
# section says b64=1.
read_file() {
  if [ -r "$1" ]; then section "$2 path=$1"; cat -- "$1" 2>/dev/null
  else section "$2 b64=1 path=$1"; as_root base64 -w0 -- "$1" 2>/dev/null; fi
  section "rc $?"
}
