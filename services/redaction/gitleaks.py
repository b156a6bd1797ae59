"""gitleaks' rules as data: the token shapes a maintained detector keeps, found in free text with Python's ``re``.

The rules are gitleaks' own ``config/gitleaks.toml`` (MIT), vendored unchanged as ``gitleaks.toml`` beside this
module, so the list of provider shapes is kept by the people whose job it is and updated by replacing that file.
Reading TOML costs a cold start ~20 ms (``tomllib``), so the process reads ``gitleaks_rules.json``, a digest of
it written by ``python -m services.redaction.gitleaks`` (the rules that apply to text, regexes already in
Python's spelling); ``tests/test_redact_rules.py`` fails when the digest is not the TOML's.

The rules are matched the way gitleaks matches them (``detect/detect.go``): a rule runs only on text that holds
one of its keywords (lower-cased; found with an Aho-Corasick automaton, as gitleaks does), its secret is the rule's
``secretGroup`` or else the first non-empty group (else the whole match), a secret whose Shannon entropy is not
above the rule's ``entropy`` is no finding, and the global and the rule's allowlists (regexes on the secret, the
match or the line; stopwords) drop a finding as they do there. Left out: rules for one kind of file only
(``path``), and ``generic-api-key``, whose job (a value after a secret-looking name) :mod:`services.redaction.keyed`
does with inferbot's own names; ``python -m bench.redaction`` measures both.

A rule's regex is compiled the first time one of its keywords occurs, so a process pays only for the rules its
text calls for. gitleaks writes RE2 (Go) syntax: :func:`to_python` rewrites what Python's ``re`` refuses or reads
otherwise (a flag group after the start, POSIX classes, ``\\z``).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from pathlib import Path

import ahocorasick

HERE = Path(__file__).parent
TOML = HERE / "gitleaks.toml"
DIGEST = HERE / "gitleaks_rules.json"
EXCLUDED = frozenset({"generic-api-key"})


# Plain classes rather than dataclasses: a dataclass is built at import, which a cold start pays for.
class Allowlist:
    """One of gitleaks' allowlists, reduced to what applies to free text (no paths, no commits)."""

    __slots__ = ("_compiled", "all_of", "other_checks", "regexes", "stopwords", "target")

    def __init__(self, regexes: tuple[str, ...] = (), target: str = "secret", stopwords: tuple[str, ...] = (),
                 all_of: bool = False, other_checks: bool = False) -> None:
        self.regexes = regexes
        self.target = target  # "secret", "match" or "line": what the regexes are searched in
        self.stopwords = stopwords
        self.all_of = all_of  # condition = "AND": every check it has must hold
        self.other_checks = other_checks  # it has paths or commits, which never hold for a line of text
        self._compiled: tuple[re.Pattern[str], ...] | None = None

    def allows(self, secret: str, match: str, line: str) -> bool:
        """True when this allowlist drops the finding, as gitleaks' ``checkFindingAllowed`` decides."""
        if self._compiled is None:
            self._compiled = tuple(re.compile(r) for r in self.regexes)
        target = match if self.target == "match" else line if self.target == "line" else secret
        by_regex = any(p.search(target) for p in self._compiled)
        low = secret.lower()
        by_word = any(w in low for w in self.stopwords)
        if self.all_of:
            checks = ([False] if self.other_checks else []) + ([by_regex] if self.regexes else []) + (
                [by_word] if self.stopwords else [])
            return bool(checks) and all(checks)
        return by_regex or by_word


class Rule:
    """One rule: its regex (in Python's spelling), its keywords, and what makes a match a finding."""

    __slots__ = ("allowlists", "entropy", "group", "id", "keywords", "min_len", "regex")

    def __init__(self, id: str, regex: str, keywords: tuple[str, ...], entropy: float = 0.0, group: int = 0,
                 min_len: int = 0, allowlists: tuple[Allowlist, ...] = ()) -> None:
        self.id = id
        self.regex = regex
        self.keywords = keywords
        self.entropy = entropy
        self.group = group  # gitleaks' secretGroup (0: the first non-empty group)
        self.min_len = min_len  # no shorter text can hold a match
        self.allowlists = allowlists


class RuleSet:
    """Rules behind a keyword gate: ``spans(text)`` is where gitleaks would find secrets in ``text``."""

    def __init__(self, rules: tuple[Rule, ...], allowlists: tuple[Allowlist, ...] = ()) -> None:
        self.rules = rules
        self.allowlists = allowlists
        self._compiled: dict[int, re.Pattern[str] | None] = {}
        by_kw: dict[str, list[int]] = {}
        for i, r in enumerate(rules):
            for k in r.keywords:
                by_kw.setdefault(k.lower(), []).append(i)
        self._always = tuple(i for i, r in enumerate(rules) if not r.keywords)  # they run on all text
        self.min_len = min((r.min_len for r in rules), default=0)
        self._gate: ahocorasick.Automaton | None = None
        if by_kw:
            gate = ahocorasick.Automaton()
            for k, ids in by_kw.items():
                gate.add_word(k, tuple(ids))
            gate.make_automaton()
            self._gate = gate

    def candidates(self, low: str) -> list[int]:
        """The rules whose keywords occur in ``low`` (the text lower-cased), in the file's order."""
        hits = list(self._gate.iter(low)) if self._gate is not None else []
        if not hits:
            return list(self._always)
        found = set(self._always)
        for _, ids in hits:
            found.update(ids)
        return sorted(found)

    def pattern(self, i: int) -> re.Pattern[str] | None:
        """Rule ``i``'s compiled regex (None if Python cannot compile it: the rule is then skipped)."""
        if i not in self._compiled:
            try:
                self._compiled[i] = re.compile(self.rules[i].regex)
            except re.error:
                self._compiled[i] = None
        return self._compiled[i]

    def spans(self, text: str, low: str | None = None) -> list[tuple[int, int, str]]:
        """(start, end, rule id) of every secret gitleaks' rules find in ``text``, in the order found."""
        if len(text) < self.min_len:
            return []
        todo = self.candidates(text.lower() if low is None else low)
        if not todo:
            return []
        out: list[tuple[int, int, str]] = []
        for i in todo:
            rule = self.rules[i]
            pat = self.pattern(i) if len(text) >= rule.min_len else None
            if pat is None:
                continue
            for m in pat.finditer(text):
                a, b = _secret_span(m, rule.group)
                if a == b:
                    continue
                secret = text[a:b]
                if rule.entropy and shannon_entropy(secret) <= rule.entropy:
                    continue
                line = _line_of(text, m.start(), m.end())
                if any(al.allows(secret, m.group(), line) for al in (*self.allowlists, *rule.allowlists)):
                    continue
                out.append((a, b, rule.id))
        return out


def _secret_span(m: re.Match[str], group: int) -> tuple[int, int]:
    if m.re.groups:
        if group:
            return m.span(group) if group <= m.re.groups and m.start(group) >= 0 else (0, 0)
        for g in range(1, m.re.groups + 1):
            if m.start(g) >= 0 and m.end(g) > m.start(g):
                return m.span(g)
    # gitleaks trims newlines off a match before it takes it as the secret
    a, b = m.span()
    while a < b and m.string[a] == "\n":
        a += 1
    while b > a and m.string[b - 1] == "\n":
        b -= 1
    return a, b


def _line_of(text: str, a: int, b: int) -> str:
    start = text.rfind("\n", 0, a) + 1
    end = text.find("\n", b)
    return text[start:] if end < 0 else text[start:end]


def shannon_entropy(s: str) -> float:
    """Bits per character, as gitleaks computes it (``shannonEntropy``)."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


_FLAG_GROUP = re.compile(r"\(\?([imsU-]+)\)")
# RE2's POSIX classes, as the ranges they stand for inside a bracket.
_POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
          "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "space": "\\t\\n\\v\\f\\r ",
          "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
          "punct": "!-/:-@\\[-`{-~"}


def to_python(go: str) -> str:
    """An RE2 (Go) regex as Python's ``re`` reads it the same way.

    A flag group after the start (``p8e-(?i)[a-z0-9]{32}``) holds in Go to the end of its enclosing group, across
    a ``|``: it becomes a scoped group ``(?i:…)`` closed at the next ``|`` or ``)`` of that group, and opened again
    after a ``|``. ``\\z`` (end of text) is ``\\Z`` in Python; a POSIX class (``[[:alnum:]]``) becomes its ranges;
    inside a class a ``[`` and a doubled ``&``, ``|``, ``-`` or ``~`` are escaped (Python reads them as set
    operations to come). Raises ``ValueError`` for a POSIX class it does not know.
    """
    out: list[str] = []
    scoped: list[list[str]] = [[]]  # per open group: the flag groups opened in it, still open
    i, n = 0, len(go)
    while i < n:
        c = go[i]
        if c == "\\" and i + 1 < n:
            esc = go[i:i + 2]
            out.append("\\Z" if esc == "\\z" else esc)
            i += 2
        elif c == "[":
            i = _class(go, i, out)
        elif c == "(":
            m = _FLAG_GROUP.match(go, i)
            if m is not None and i > 0:
                flags = m.group(1).replace("U", "")  # RE2's ungreedy switch: gitleaks' rules do not use it
                if flags.strip("-"):
                    out.append(f"(?{flags}:")
                    scoped[-1].append(flags)
                i = m.end()
                continue
            scoped.append([])
            out.append(c)
            i += 1
        elif c == "|":
            out.append(")" * len(scoped[-1]) + "|" + "".join(f"(?{f}:" for f in scoped[-1]))
            i += 1
        elif c == ")":
            out.append(")" * len(scoped.pop()) + ")")
            if not scoped:
                scoped.append([])
            i += 1
        else:
            out.append(c)
            i += 1
    out.append(")" * sum(len(f) for f in scoped))
    return "".join(out)


def _class(go: str, i: int, out: list[str]) -> int:
    """Copy the bracket class at ``go[i]`` into ``out`` in Python's spelling; returns the index after it."""
    n = len(go)
    j = i + 1
    out.append("[")
    if j < n and go[j] == "^":
        out.append("^")
        j += 1
    if j < n and go[j] == "]":  # a "]" first in a class is a literal
        out.append("\\]")
        j += 1
    while j < n and go[j] != "]":
        c = go[j]
        if c == "\\" and j + 1 < n:
            out.append(go[j:j + 2])
            j += 2
        elif go.startswith("[:", j):
            k = go.find(":]", j + 2)
            name = go[j + 2:k] if k > 0 else ""
            if name not in _POSIX:
                raise ValueError(f"unknown POSIX class [:{name}:]")
            out.append(_POSIX[name])
            j = k + 2
        elif c == "[":
            out.append("\\[")
            j += 1
        elif c in "&|~-" and j + 1 < n and go[j + 1] == c:
            out.append(c + "\\" + c)
            j += 2
        else:
            out.append(c)
            j += 1
    out.append("]")
    return j + 1


def digest(toml_text: str, exclude: frozenset[str] = EXCLUDED) -> dict[str, object]:
    """The digest of a gitleaks config that ``gitleaks_rules.json`` holds: the rules that apply to free text, their
    regexes in Python's spelling with the shortest text each can match, and the allowlists."""
    import hashlib
    import importlib
    import tomllib

    sre_parse = importlib.import_module("re._parser")  # only to write the digest: each regex's shortest match

    data = tomllib.loads(toml_text)
    rules: list[dict[str, object]] = []
    skipped: list[str] = []
    for raw in data.get("rules", []):
        rid = str(raw.get("id"))
        if "regex" not in raw or raw.get("path") or rid in exclude:
            skipped.append(rid)
            continue
        regex = to_python(str(raw["regex"]))
        rules.append({
            "id": rid, "regex": regex, "keywords": [str(k).lower() for k in raw.get("keywords", [])],
            "entropy": float(raw.get("entropy") or 0.0), "group": int(raw.get("secretGroup") or 0),
            "min_len": int(sre_parse.parse(regex).getwidth()[0]),
            "allowlists": [_allowlist_digest(a) for a in raw.get("allowlists", [])],
        })
    glob = list(data.get("allowlists", []))
    if isinstance(data.get("allowlist"), dict):  # the older spelling, which gitleaks still writes
        glob.append(data["allowlist"])
    return {
        "notice": "Derived from gitleaks.toml (gitleaks' rules, MIT, Copyright (c) 2019 Zachary Rice: the licence "
                  "is in that file). Do not edit: `python -m services.redaction.gitleaks` writes it.",
        "sha256": hashlib.sha256(toml_text.encode()).hexdigest(),
        "left_out": skipped,
        "allowlists": [_allowlist_digest(a) for a in glob],
        "rules": rules,
    }


def _allowlist_digest(raw: dict[str, object]) -> dict[str, object]:
    return {"regexes": [to_python(str(r)) for r in _strs(raw.get("regexes"))],
            "target": str(raw.get("regexTarget") or "secret"),
            "stopwords": [w.lower() for w in _strs(raw.get("stopwords"))],
            "all_of": str(raw.get("condition", "OR")).upper() == "AND",
            "other_checks": bool(raw.get("paths") or raw.get("commits"))}


def _strs(v: object) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


def _allowlist(d: dict[str, object]) -> Allowlist:
    return Allowlist(regexes=tuple(_strs(d.get("regexes"))), target=str(d.get("target", "secret")),
                     stopwords=tuple(_strs(d.get("stopwords"))), all_of=bool(d.get("all_of")),
                     other_checks=bool(d.get("other_checks")))


def from_digest(d: dict[str, object]) -> RuleSet:
    """The :class:`RuleSet` of a digest (see :func:`digest`)."""
    rules: list[Rule] = []
    raw_rules = d.get("rules")
    for r in raw_rules if isinstance(raw_rules, list) else []:
        lists = r.get("allowlists") or []
        rules.append(Rule(id=str(r["id"]), regex=str(r["regex"]), keywords=tuple(_strs(r.get("keywords"))),
                          entropy=float(r.get("entropy") or 0.0), group=int(r.get("group") or 0),
                          min_len=int(r.get("min_len") or 0), allowlists=tuple(_allowlist(a) for a in lists)))
    glob = d.get("allowlists")
    return RuleSet(tuple(rules), tuple(_allowlist(a) for a in glob if isinstance(a, dict)) if isinstance(glob, list)
                   else ())


@functools.cache
def rules() -> RuleSet:
    """The vendored gitleaks rules, read from their digest once per process (on the first call)."""
    data: dict[str, object] = json.loads(DIGEST.read_text(encoding="utf-8"))
    return from_digest(data)


def write_digest() -> None:
    """Write ``gitleaks_rules.json`` from ``gitleaks.toml`` (after the TOML was replaced by a newer one)."""
    DIGEST.write_text(json.dumps(digest(TOML.read_text(encoding="utf-8")), indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_digest()
