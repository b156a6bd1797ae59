"""Shapes replaced wherever they appear: provider tokens gitleaks has no rule for (or a narrower one), PEM private
keys, webhooks, URL credentials (a password, or a token as the user name) and passwords on printed command lines.

The provider token shapes come first from gitleaks' rules (:mod:`services.redaction.gitleaks`); the list here is
what those rules do not cover: prefixes gitleaks has no rule for (Hugging Face tokens with digits, NVIDIA
``nvapi-``, Replicate ``r8_``, Groq ``gsk_``, any ``sk-…`` key, Databricks and Google OAuth variants, Mailgun's
``key-…`` without the word "mailgun" nearby, TestPyPI tokens), looser lengths than gitleaks' exact ones, and
AWS's documented example key, which gitleaks allows on purpose.
"""

from __future__ import annotations

import re

from services.redaction.names import REDACTED, lazy_re

SHAPE_HINT = re.compile(
    r"A(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA|BIA|CCA|Iza)|g(?:h[pousr]_|ithub_pat_|lpat-|sk_)|x(?:ox|app-)|hf_|sk-|"
    r"nvapi-|dapi|ya29\.|eyJ|PRIVATE KEY|hooks\.slack|discord|r8_|key-|pypi-"
)
# Provider token shapes, PEM private keys and Slack webhooks: replaced wherever they appear.
TOKEN_SHAPES = re.compile(
    r"-----BEGIN[A-Z ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z ]*PRIVATE KEY( BLOCK)?-----|\Z)"
    r"|https?://hooks\.slack\.com/(?:services|workflows|triggers)/[^\s'\"<>]+"
    r"|https?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[^\s'\"<>]+"
    r"|\b(?:"
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{12,}\b"
    r"|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{16,}"
    r"|xox[abposre]-[A-Za-z0-9\-]{8,}|xapp-[A-Za-z0-9\-]{8,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{8,}"
    r"|nvapi-[A-Za-z0-9_\-]{16,}"
    r"|dapi[0-9a-f]{20,}(?:-\d+)?"
    r"|AIza[0-9A-Za-z_\-]{30,}|ya29\.[0-9A-Za-z_\-]{16,}"
    r"|eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"
    r"|r8_[A-Za-z0-9]{20,}"
    r"|gsk_[A-Za-z0-9]{20,}"
    r"|key-[0-9a-f]{32}\b"
    r"|pypi-[A-Za-z0-9_\-]{50,}"
    r")",
    re.DOTALL,
)
# user:password@ in a URL; the password runs to the LAST "@" of the URL (it may contain "@", "/", ":").
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/:@'\"]*):(?P<pw>[^\s'\"]*)@")
# A user name alone (https://TOKEN@host/…): a token there is a credential too (GitHub, OTLP collectors…).
URL_USER = lazy_re(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/:@'\"\[\]]+)@")
# A login name as systems spell them (git@, postgres@, ubuntu@, deploy01@): shown; anything else is redacted.
_LOGIN_NAME = lazy_re(r"[a-z_][a-z0-9_.\-]{0,31}")
# A password given to a client on its command line: mysql -p PW / -pPW, sshpass -p, docker login -p, redis-cli -a.
# (curl -u user:PW is gitleaks' curl-auth-user rule; --password PW, --password=PW are secret-named flags.)
CMD_PASSWORD = lazy_re(
    r"(?P<k>\b(?:(?:mysql\w*|mariadb[\w\-]*)\b[^\n|;&]*?[ \t]-p"
    r"|sshpass\b[^\n|;&]*?[ \t]-p"
    r"|(?:docker|podman|nerdctl|buildah|skopeo|oras|helm(?:[ \t]+registry)?)[ \t]+login\b[^\n|;&]*?[ \t]-p"
    r"|redis-cli\b[^\n|;&]*?[ \t]-a)[ \t]*)"
    r"(?P<v>(?!-|\[redacted\])(?:'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"]+))"
)


def keep_lines(m: re.Match[str]) -> str:
    """The marker for a matched shape; a PEM block over several journal lines becomes as many lines."""
    return "\n".join([REDACTED] * (m.group(0).count("\n") + 1)) if "\n" in m.group(0) else REDACTED


def userinfo(m: re.Match[str]) -> str:
    """``scheme://user:[redacted]@`` for a match of :data:`URL_USERINFO`."""
    return f"{m['scheme']}{m['user']}:{REDACTED}@" if m["pw"] != REDACTED else m.group(0)


def user_only(m: re.Match[str]) -> str:
    """``scheme://[redacted]@`` for a match of :data:`URL_USER` unless the user is a plain login name."""
    user = m["user"]
    if user == REDACTED or (_LOGIN_NAME().fullmatch(user) and sum(c.isdigit() for c in user) <= 4):
        return m.group(0)
    return f"{m['scheme']}{REDACTED}@"


def cmd_password(m: re.Match[str]) -> str:
    """The command with its password replaced, for a match of :data:`CMD_PASSWORD`."""
    v = m["v"]
    quote = v[0] if v[0] in "'\"" else ""
    return f"{m['k']}{quote}{REDACTED}{quote}"
