# inferbot: the Slack bot in a container.
#
#   docker build -t inferbot .
#   docker run -d --name inferbot --restart unless-stopped \
#     -e SLACK_BOT_TOKEN_FILE=/run/secrets/slack_bot_token \
#     -e SLACK_APP_TOKEN_FILE=/run/secrets/slack_app_token \
#     -v /srv/inferbot/secrets:/run/secrets:ro \
#     -v /srv/inferbot/inferbot.toml:/etc/inferbot/inferbot.toml:ro \
#     -v /srv/inferbot/ssh:/home/inferbot/.ssh:ro \
#     -v inferbot-state:/var/lib/inferbot \
#     inferbot
#
# Config and the SSH key (+ known_hosts) are mounted read-only; point `key_file` / `known_hosts` in the
# config at /home/inferbot/.ssh/…. State (SQLite: jobs, audit log, load history) lives in the volume.
# Tokens come only from the environment or from files named by *_FILE (Docker/Kubernetes secrets).
# Events API over HTTP instead of Socket Mode: add `-p 3000:3000 -e SLACK_SIGNING_SECRET_FILE=…` and
# the command `serve --http --port 3000`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-client \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . /src
RUN pip install . && rm -rf /src

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin inferbot \
 && mkdir -p /var/lib/inferbot /etc/inferbot \
 && chown inferbot:inferbot /var/lib/inferbot

ENV INFERBOT_CONFIG=/etc/inferbot/inferbot.toml \
    XDG_STATE_HOME=/var/lib \
    INFERBOT_LOG_LEVEL=INFO

VOLUME /var/lib/inferbot
WORKDIR /var/lib/inferbot
USER inferbot
EXPOSE 3000

# Both modes touch $XDG_STATE_HOME/inferbot/heartbeat every 30 s while connected (Socket Mode: the
# websocket is up) or serving (HTTP); the check fails when it is older than 90 s or missing, which also
# covers a dead process. For HTTP mode you can probe the endpoint instead:
#   --health-cmd 'python -c "import urllib.request as u; u.urlopen(\"http://127.0.0.1:3000/healthz\", timeout=3)"'
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, sys, time; p = '/var/lib/inferbot/heartbeat'; sys.exit(0 if os.path.exists(p) and time.time() - os.path.getmtime(p) < 90 else 1)"]

ENTRYPOINT ["inferbot"]
CMD ["serve"]
