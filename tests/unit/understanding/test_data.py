"""bot/understanding/data/: the compiled copy a cold start reads is the TOML people edit."""

from __future__ import annotations

import json
from pathlib import Path

from bot.understanding import wordlists

DATA = Path(wordlists.__file__).parent / "data"


def test_compiled_json_is_the_toml() -> None:
    """Edit flags.toml or lexicon.toml, then run `python -m bot.understanding.wordlists`."""
    assert json.loads((DATA / "compiled.json").read_text("utf-8")) == wordlists.compile_data(DATA)


def test_the_readers_read_the_compiled_copy() -> None:
    assert "max-model-len" in wordlists.flags_data()["flags"]
    assert {"en", "de", "es", "fr", "zh", "ja", "stop"} <= set(wordlists.lexicon_data())
