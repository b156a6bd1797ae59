"""gitleaks' rules, vendored as data (services/redaction/gitleaks.toml and its digest): they load, they compile
under Python's ``re`` as RE2 reads them, they ship with the package, and they find what gitleaks finds."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path

import pytest

from services.redact import REDACTED, redact_patterns
from services.redaction import gitleaks

ROOT = Path(__file__).parents[4]


def test_the_digest_is_the_vendored_toml() -> None:
    """Replacing gitleaks.toml without `python -m services.redaction.gitleaks` fails here."""
    toml = gitleaks.TOML.read_text(encoding="utf-8")
    assert json.loads(gitleaks.DIGEST.read_text(encoding="utf-8")) == gitleaks.digest(toml)


def test_the_toml_carries_gitleaks_licence_and_source() -> None:
    head = gitleaks.TOML.read_text(encoding="utf-8").split("\n# ---- gitleaks ----\n")[0]
    assert "MIT License" in head and "Copyright (c) 2019 Zachary Rice" in head
    assert "https://github.com/gitleaks/gitleaks" in head and "Permission is hereby granted" in head


def test_every_rule_that_applies_to_text_is_used_and_compiles() -> None:
    data = tomllib.loads(gitleaks.TOML.read_text(encoding="utf-8"))
    ids = {r["id"] for r in data["rules"] if "regex" in r and not r.get("path")} - gitleaks.EXCLUDED
    rules = gitleaks.rules()
    assert {r.id for r in rules.rules} == ids and len(ids) > 200
    for i, r in enumerate(rules.rules):
        assert rules.pattern(i) is not None, r.id


@pytest.mark.parametrize(("go", "python"), [
    (r"\b(p8e-(?i)[a-z0-9]{32})(?:[\x60'\"\s;]|$)", r"\b(p8e-(?i:[a-z0-9]{32}))(?:[\x60'\"\s;]|$)"),
    # after a "|" the flag still holds in Go: the next branch opens its scope again
    (r"(?:\"(?i)(?:a)|'(?i)(?:b))c", r"(?:\"(?i:(?:a))|(?i:'(?i:(?:b))))c"),
    (r"\b(sha256~[\w-]{43})(?:[^\w-]|\z)", r"\b(sha256~[\w-]{43})(?:[^\w-]|\Z)"),
    (r"\b(pat[[:alnum:]]{14}\.[a-f0-9]{64})\b", r"\b(pat[0-9A-Za-z]{14}\.[a-f0-9]{64})\b"),
    ("(?i)abc(?-i:D)", "(?i)abc(?-i:D)"),
])
def test_re2_syntax_becomes_python(go: str, python: str) -> None:
    assert gitleaks.to_python(go) == python
    re.compile(python)


def test_a_flag_group_holds_to_the_end_of_its_group_as_in_go() -> None:
    pat = re.compile(gitleaks.to_python(r"(?:x(?i)ab|cd)E"))
    assert pat.fullmatch("xABE") and pat.fullmatch("CDE") and not pat.fullmatch("XabE") and not pat.fullmatch("cde")


def test_gitleaks_semantics_keywords_entropy_allowlists() -> None:
    rules = gitleaks.rules()
    twilio = "SK2c695dd1272d2b0ab9c231fbcf8bbbd8"
    assert [r for _, _, r in rules.spans(f"key {twilio} in use")] == ["twilio-api-key"]
    assert rules.spans("SK00000000000000000000000000000000") == []  # entropy 0: no finding
    assert rules.spans("AKIAIOSFODNN7EXAMPLE") == []  # gitleaks' own allowlist: AWS's documented example
    assert redact_patterns("AKIAIOSFODNN7EXAMPLE") == REDACTED  # inferbot's shapes still take it


def test_the_rule_files_ship_with_the_package() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = cfg["tool"]["setuptools"]["package-data"]
    globs = [*data.get("*", []), *data.get("services.redaction", [])]
    for f in (gitleaks.TOML.name, gitleaks.DIGEST.name):
        assert any(fnmatch.fnmatch(f, g) for g in globs), f
