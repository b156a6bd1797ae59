"""Word lists kept as data (``data/*.txt``): English words that are never names, the most frequent English
words, and open-model family names."""

from __future__ import annotations

import functools
import re
from importlib import resources


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


def model_families() -> frozenset[str]:
    """Open-model family names (``data/model_families.txt``): a name wherever it stands."""
    return _data_words("model_families.txt")
