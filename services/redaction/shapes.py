"""Token shapes replaced wherever they appear: provider tokens, PEM private keys, webhooks, URL credentials."""

from __future__ import annotations

import re

from services.redaction.names import REDACTED

SHAPE_HINT = re.compile(
    r"A(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA|BIA|CCA|Iza)|g(?:h[pousr]_|ithub_pat_|lpat-)|x(?:ox|app-)|hf_|sk-|"
    r"nvapi-|dapi|ya29\.|eyJ|PRIVATE KEY|hooks\.slack|discord"
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
    r")",
    re.DOTALL,
)
# user:password@ in a URL; the password runs to the LAST "@" of the URL (it may contain "@", "/", ":").
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/:@'\"]*):(?P<pw>[^\s'\"]*)@")


def keep_lines(m: re.Match[str]) -> str:
    """The marker for a matched shape; a PEM block over several journal lines becomes as many lines."""
    return "\n".join([REDACTED] * (m.group(0).count("\n") + 1)) if "\n" in m.group(0) else REDACTED


def userinfo(m: re.Match[str]) -> str:
    """``scheme://user:[redacted]@`` for a match of :data:`URL_USERINFO`."""
    return f"{m['scheme']}{m['user']}:{REDACTED}@" if m["pw"] != REDACTED else m.group(0)
