"""The secrets corpus of the real-systemd tier is big enough and spread over every place a secret can be."""

from __future__ import annotations

from tests.samples.secrets import systemd_corpus as corpus


def test_corpus_is_big_enough() -> None:
    places = {s.where for s in corpus.SHAPES}
    assert len(corpus.SHAPES) >= 40 and places == {"environment", "env-file", "flag", "journal"}
    reused = [s for s in corpus.SHAPES if s.name == corpus.CROSS_UNIT]
    assert len(set(corpus.values())) == len(corpus.values()) - len(reused)  # only that one repeats a value
