"""Word lists kept as data (``data/``): English words that are never names, the most frequent English words,
open-model family names, the words of vLLM's flags and the environment (``flags.toml``) and the other languages'
words (``lexicon.toml``).

The two TOML files are what people edit; parsing them would be paid by every cold start, so the process reads
``data/compiled.json``, their parsed content with each file's SHA-256, written by ``python -m
bot.understanding.wordlists``; ``tests/unit/understanding/test_data.py`` fails when it is not the TOML's.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

_TOMLS = ("flags.toml", "lexicon.toml")


@functools.cache
def _data_words(name: str) -> frozenset[str]:
    text = resources.files("bot.understanding").joinpath(f"data/{name}").read_text("utf-8")
    return frozenset(re.sub(r"(?m)^#.*$", "", text).split())


def english() -> frozenset[str]:
    """English words that are never names (``data/english.txt``)."""
    return _data_words("english.txt")


def common_english() -> frozenset[str]:
    """The 15,000 most frequent English words (``data/common_english.txt``; see bench/english_words.py)."""
    return _data_words("common_english.txt")


_ENDINGS = ("ing", "ed", "es", "s", "er")


def inflected_english(word: str) -> bool:
    """``word`` is a common English word or one with an ending added ("throttling", "spiking", "stopped")."""
    words = common_english()
    if word in words:
        return True
    for end in _ENDINGS:
        base = word.removesuffix(end)
        if base != word and len(base) >= 3 and (
                base in words or base + "e" in words or (base[-1] == base[-2] and base[:-1] in words)):
            return True
    return False


def model_families() -> frozenset[str]:
    """Open-model family names (``data/model_families.txt``): a name wherever it stands."""
    return _data_words("model_families.txt")


@functools.cache
def _compiled() -> dict[str, Any]:
    return dict(json.loads(resources.files("bot.understanding").joinpath("data/compiled.json").read_text("utf-8")))


def flags_data() -> dict[str, dict[str, list[str]]]:
    """``data/flags.toml``: the everyday words of vLLM's flags and the environment, and the values they take."""
    return dict(_compiled()["flags.toml"]["data"])


def lexicon_data() -> dict[str, dict[str, str]]:
    """``data/lexicon.toml``: the other languages' words, and English idioms, as English words."""
    return dict(_compiled()["lexicon.toml"]["data"])


def compile_data(data_dir: Path) -> dict[str, Any]:
    """What ``data/compiled.json`` holds for the TOML files in ``data_dir``."""
    import hashlib  # only to write (and check) the file
    import tomllib

    out: dict[str, Any] = {}
    for name in _TOMLS:
        text = (data_dir / name).read_text("utf-8")
        out[name] = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "data": tomllib.loads(text)}
    return out


if __name__ == "__main__":
    here = Path(__file__).parent / "data"
    (here / "compiled.json").write_text(json.dumps(compile_data(here), ensure_ascii=False, sort_keys=True) + "\n",
                                        "utf-8")
