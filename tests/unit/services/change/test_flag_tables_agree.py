"""inferbot has two tables of vLLM's flags: the settings parser's (``services/parse/vllm_args.py``: which flags
take no value, which take several words, the short aliases, the removed flags) and the settings change's
(``services/change/vllm_flags.toml``: every flag and the type of its value). They answer the same question — how
vLLM's argparse reads a word — so they must agree, or a flag the "what are current settings?" answer reads one
way is checked another way by a change's preflight (a switch the parser does not know swallows the model that
follows it; a flag the preflight does not know is refused as a typo).

The TOML is the richer table (every flag, with its type, cited from vLLM's source); this test holds the parser's
sets to it, flag by flag, so that adding a flag to one table without the other fails here.
"""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from services.change import catalogue
from services.change.catalogue import VersionTable
from services.parse import vllm_args

# The one place the parser reads a flag differently from vLLM on purpose: vLLM's --middleware is
# action="append" (one word per occurrence; vllm/entrypoints/openai/cli_args.py), but the parser takes every
# following word, so that a credential-bearing URL after it is still found and redacted (secret_values).
PARSER_GREEDY_ON_PURPOSE = frozenset({"middleware"})


@pytest.fixture(scope="module")
def table() -> VersionTable:
    t, _note = catalogue.table_for(None)  # the newest table: the one the parser's sets describe
    return t


def _takes_no_value(t: VersionTable) -> set[str]:
    return {n for n, f in t.flags.items() if not f.takes_value}


def test_the_short_aliases_are_the_same(table: VersionTable) -> None:
    assert table.aliases == vllm_args.SHORT_ALIASES


def test_every_flag_the_parser_reads_without_a_value_takes_none(table: VersionTable) -> None:
    switches = _takes_no_value(table)
    removed = set(table.removed)
    assert sorted(vllm_args.KNOWN_SWITCHES - switches - removed) == [], "switches the change's table lacks"
    assert sorted(switches - vllm_args.KNOWN_SWITCHES) == [], "switches the parser would give the next word to"


def test_the_flags_that_take_several_words_are_the_same(table: VersionTable) -> None:
    multi = {n for n, f in table.flags.items() if f.multi}
    assert multi == vllm_args.MULTI_VALUE_FLAGS - PARSER_GREEDY_ON_PURPOSE
    for name in PARSER_GREEDY_ON_PURPOSE:
        assert table.flags[name].type == "append"  # still a flag of vLLM, one word each time


def test_optional_values_secrets_and_removed_flags(table: VersionTable) -> None:
    assert {n for n, f in table.flags.items() if f.type == "optional-str"} == vllm_args.OPTIONAL_VALUE_FLAGS
    assert all(name in table.flags for name in vllm_args.SECRET_FLAGS)
    assert set(table.removed) == set(vllm_args.REMOVED_FLAGS)
    assert not set(table.removed) & set(table.flags)


def test_every_flag_the_parser_groups_is_a_flag_of_vllm(table: VersionTable) -> None:
    names = [p for _group, patterns in vllm_args.FLAG_GROUPS for p in patterns]
    known = set(table.flags) | set(table.removed)
    assert sorted(n for n in names if "*" not in n and n not in known) == []
    assert [p for p in names if "*" in p and not any(fnmatchcase(n, p) for n in known)] == []


def test_every_flag_people_have_everyday_words_for_is_a_flag_of_vllm(table: VersionTable) -> None:
    """The understanding's third list (``bot/understanding/data/flags.toml``: "context length" → max-model-len)
    names only flags the change's table knows, so a flag a question finds is one a change can set."""
    words = tomllib.loads((Path(__file__).parents[4] / "bot/understanding/data/flags.toml").read_text("utf-8"))
    assert sorted(n for n in words["flags"] if n not in table.flags and n not in table.removed) == []
