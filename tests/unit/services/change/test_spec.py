"""ChangeSpec from chat text and terminal options: quoting, aliases, spellings, did-you-mean, bad input."""

from __future__ import annotations

import pytest

from services.change.spec import ChangeSpec, SpecError, parse_options, parse_text


def spec(verb: str, text: str) -> ChangeSpec:
    got = parse_text(verb, text)  # type: ignore[arg-type]
    assert isinstance(got, ChangeSpec), got
    return got


def error(verb: str, text: str) -> SpecError:
    got = parse_text(verb, text)  # type: ignore[arg-type]
    assert isinstance(got, SpecError), got
    return got


def test_the_issues_examples() -> None:
    assert spec("set", "max-num-seqs 256").set_flags == {"max-num-seqs": "256"}
    sc = spec("set", """--speculative-config '{"method":"ngram","num_speculative_tokens":4}'""")
    assert sc.set_flags == {"speculative-config": '{"method":"ngram","num_speculative_tokens":4}'}
    assert spec("unset", "--enforce-eager").unset_flags == ["enforce-eager"]
    assert spec("set", "env NCCL_PROTO=Simple").set_env == {"NCCL_PROTO": "Simple"}
    assert spec("unset", "env NCCL_ALGO").unset_env == ["NCCL_ALGO"]
    several = spec("change", "--max-model-len 65536 --max-num-seqs 128")
    assert several.set_flags == {"max-model-len": "65536", "max-num-seqs": "128"}


@pytest.mark.parametrize("text", ["-tp 4", "tp 4", "--tensor_parallel_size 4", "tensor parallel size 4",
                                  "--tensor-parallel-size=4", "TENSOR-PARALLEL-SIZE 4"])
def test_names_resolve_like_the_flag_answer(text: str) -> None:
    assert spec("set", text).set_flags == {"tensor-parallel-size": "4"}


def test_quoted_values_are_one_argument_single_or_double() -> None:
    assert spec("set", "--chat-template 'a b  c'").set_flags == {"chat-template": "a b  c"}
    assert spec("set", '--chat-template "it\'s \\"x\\""').set_flags == {"chat-template": 'it\'s "x"'}
    assert spec("set", "env A='x y' B=\"1 2\"").set_env == {"A": "x y", "B": "1 2"}


def test_unbalanced_quotes_are_a_friendly_refusal() -> None:
    e = error("set", "--chat-template 'abc")
    assert e.message.startswith("the quotes do not match")
    assert "Traceback" not in e.message


def test_did_you_mean() -> None:
    e = error("set", "--max-num-seq 3")
    assert e.suggestions == ["max-num-seqs"] and "did you mean --max-num-seqs?" in e.message
    assert error("set", "--gpu-memory-utilisation 0.9").suggestions == ["gpu-memory-utilization"]
    assert error("set", "--no-such-flag-at-all 1").suggestions == []


def test_values_of_the_wrong_type() -> None:
    assert error("set", "--max-num-seqs abc").message == "--max-num-seqs wants an integer, not 'abc'"
    assert "wants a number" in error("set", "gpu-memory-utilization lots").message
    assert "wants one of" in error("set", "--dtype fp9").message
    assert "not valid JSON" in error("set", "--speculative-config {oops").message
    assert "JSON object" in error("set", "--speculative-config 4").message
    assert spec("set", "--max-model-len 64K").set_flags == {"max-model-len": "64K"}
    assert "6.4K" in error("set", "--max-model-len 6.4K").message  # vLLM refuses decimals with K


def test_booleans_as_switches_and_words() -> None:
    assert spec("set", "--enforce-eager").set_flags == {"enforce-eager": True}
    assert spec("set", "--no-enforce-eager").set_flags == {"enforce-eager": False}
    assert spec("set", "enforce-eager off").set_flags == {"enforce-eager": False}
    assert spec("set", "enforce eager on").set_flags == {"enforce-eager": True}
    # A store_true flag has no --no- form: off means removing it.
    assert spec("set", "--disable-log-stats false").unset_flags == ["disable-log-stats"]
    assert "takes no value" in error("set", "--no-enforce-eager=1").message


def test_multi_value_flags_take_every_word_up_to_the_next_flag() -> None:
    got = spec("set", "served-model-name a b --port 9")
    assert got.set_flags == {"served-model-name": ["a", "b"], "port": "9"}


def test_bad_input() -> None:
    assert error("set", "").message.startswith("nothing to change")
    assert "line break" in error("set", "--chat-template 'a\nb'").message
    assert "both set and unset" in error("change", "--max-num-seqs 2 unset max-num-seqs").message
    assert "twice with different values" in error("set", "--port 1 --port 2").message
    assert "model" in error("set", "model /other").message
    assert "removed from vLLM" in error("set", "--swap-space 4").message
    assert "needs a value" in error("set", "--max-num-seqs").message
    assert "not an environment variable name" in error("set", "env 1BAD=x").message
    assert "(no value)" in error("unset", "env NCCL_ALGO=x").message


def test_terminal_options() -> None:
    got = parse_options(["max-num-seqs=256", "no-enforce-eager", "served-model-name=a 'b c'"], ["api-key"],
                        ["NCCL_PROTO=Simple"], ["NCCL_ALGO"])
    assert isinstance(got, ChangeSpec)
    assert got.set_flags == {"max-num-seqs": "256", "enforce-eager": False, "served-model-name": ["a", "b c"]}
    assert got.unset_flags == ["api-key"] and got.set_env == {"NCCL_PROTO": "Simple"} and got.unset_env == ["NCCL_ALGO"]
    # The shell already split the words: a value is never split again (except for multi-value flags).
    one = parse_options(["chat-template=a 'b' c"], [], [], [])
    assert isinstance(one, ChangeSpec) and one.set_flags == {"chat-template": "a 'b' c"}
    bad = parse_options(["max-num-seqs"], [], [], [])
    assert isinstance(bad, SpecError) and "--set max-num-seqs=VALUE" in bad.message
