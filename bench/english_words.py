"""Regenerate ``bot/understanding/data/common_english.txt``: the 15,000 most frequent English words.

A word there is never taken for an unknown service name ("status for ages" names nothing); a close
misspelling of a known name still counts as that name. The source is the English word-frequency list that
pyspellchecker ships (``pip install pyspellchecker``; a development tool only, never imported by the bot):
``python -m bench.english_words``.
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path

TOP = 15_000
OUT = Path(__file__).resolve().parents[1] / "bot" / "understanding" / "data" / "common_english.txt"


def main() -> int:
    """Write the list (alphabetic words of two letters or more, most frequent first, then sorted)."""
    raw = resources.files("spellchecker").joinpath("resources/en.json.gz").read_bytes()
    freq: dict[str, int] = json.loads(gzip.decompress(raw))
    ranked = [w for w in sorted(freq, key=lambda w: -freq[w]) if w.isalpha() and w.isascii() and len(w) >= 2]
    words = sorted(ranked[:TOP])
    OUT.write_text("\n".join(words) + "\n")
    print(f"{len(words)} words → {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
