#!/usr/bin/env bash
# The test command (README): installs what the tests need, then runs ruff, mypy and pytest.
# Debian packages (openssh-server for the real-sshd tests, curl used by the probe, strace to count the
# probe's processes, shellcheck to check the probe's shell, systemd-container and debootstrap for the
# real-systemd tier, postgresql for the store on PostgreSQL and the replica tests) are installed when running
# as root; otherwise it says which to install.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
# The real-systemd tier (tests/systemd) boots a Debian container; it needs root, so only root installs them.
if [ "$(id -u)" = 0 ]; then
  command -v systemd-nspawn >/dev/null 2>&1 || need+=(systemd-container)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  # The store and replica tests start a real PostgreSQL (tests/pg.py: initdb as inferbot-test, pg_ctl on
  # 127.0.0.1); without root they skip with one line when it is not installed.
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing Debian packages: ${need[*]}"
    apt-get update -qq
    # Another process may hold the dpkg lock for a moment: wait for it instead of failing.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=120 "${need[@]}" >/dev/null
  else
    echo "tests need: ${need[*]} — run: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
fi
if [ "$(id -u)" = 0 ]; then
  # SSH tests log in as an unprivileged user (root logins are slow here and refuse remote signals).
  id inferbot-test >/dev/null 2>&1 || useradd -m -s /bin/sh inferbot-test
  usermod -p '*' inferbot-test
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/ruff check .
.venv/bin/mypy
# Most of the suite's time is spent waiting (loads, leases, timeouts), not computing: it runs on several workers
# (INFERBOT_TEST_WORKERS, 3 by default; 0 runs it in this process), the real-systemd tier on one of them.
workers=${INFERBOT_TEST_WORKERS:-3}
if [ "$workers" = 0 ]; then
  .venv/bin/pytest -q -p no:cacheprovider "$@"
else
  .venv/bin/pytest -q -p no:cacheprovider -n "$workers" --dist loadgroup "$@"
fi
