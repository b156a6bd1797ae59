"""inferbot's drop-in: systemd quoting per directive, checked against the simulator's own reading of unit files
(services/sim/systemd_syntax.py, itself checked against a real systemd) and round-tripped through the product's
parser. The real systemd 252 check is tests/systemd/test_change_systemd.py."""

from __future__ import annotations

import shlex

import pytest

from services.change import dropin
from services.change.spec import ChangeSpec
from services.parse import unitfile
from services.sim import systemd_syntax as truth

HARD = [
    "plain", "a b  c", "it's", 'say "hi"', "100%", "%i %n", "$HOME", "${PORT}", "$$", "back\\slash", "\\n", "end\\",
    '{"method":"ngram","x":{"y":[1,"a b"],"z":"50% of $X"}}', ";", "", " ", "tab\there", "ünïcode", "-1", "a=b",
]
SPEC = {"n": "vllm-x.service", "i": "", "N": "vllm-x", "p": "vllm-x"}


@pytest.mark.parametrize("value", HARD)
def test_exec_words_reach_the_process_as_written(value: str) -> None:
    line = "/opt/v/bin/vllm serve m --chat-template " + dropin.exec_word(value)
    argv = truth.expand_argv(truth.command_words(line, SPEC), {"HOME": "/root", "PORT": "8000"})
    assert argv[-1] == value
    # The product's own reading of the same line agrees (the round trip the plan relies on).
    assert unitfile.split_command(line, {"HOME": "/root", "PORT": "8000"}, SPEC)[-1] == value


@pytest.mark.parametrize("value", HARD)
def test_environment_values_reach_the_process_as_written(value: str) -> None:
    env = truth.environment_line(dropin.environment_item("X", value), SPEC)
    assert env == {"X": value}
    assert unitfile.parse_environment_assignments(dropin.environment_item("X", value), SPEC) == {"X": value}


def test_a_naive_quoter_fails_these_checks() -> None:
    """The checks above can fail: shell quoting is not systemd quoting."""
    wrong = []
    for value in HARD:
        line = "/opt/v/bin/vllm serve m --x " + shlex.quote(value)
        if truth.expand_argv(truth.command_words(line, SPEC), {"HOME": "/root", "PORT": "8000"})[-1:] != [value]:
            wrong.append(value)
    assert {"$HOME", "${PORT}", "back\\slash", "%i %n", "$$"} <= set(wrong)
    # And $$ written into Environment= (as for ExecStart=) reaches the process doubled.
    assert truth.environment_line('"X=$$HOME"', SPEC) == {"X": "$$HOME"}


def test_the_drop_in_text_and_its_delta_read_back() -> None:
    delta = ChangeSpec(set_flags={"max-num-seqs": "256", "enforce-eager": False}, unset_flags=["api-key"],
                       set_env={"NCCL_PROTO": "Simple", "W": '100% "$X"'}, unset_env=["NCCL_ALGO"])
    text = dropin.render("vllm-x.service", "/etc/systemd/system/vllm-x.service.d/90-inferbot.conf", delta,
                         "/opt/v/bin/vllm serve m --max-num-seqs 256", "#12")
    lines = text.splitlines()
    assert lines[0] == dropin.HEADER and "change #12" in lines[1]
    assert "sudo rm /etc/systemd/system/vllm-x.service.d/90-inferbot.conf && sudo systemctl daemon-reload" in text
    assert lines[-4:] == ['Environment="W=100%% \\"$X\\""', "UnsetEnvironment=NCCL_ALGO", "ExecStart=",
                          "ExecStart=/opt/v/bin/vllm serve m --max-num-seqs 256"]
    assert dropin.read_delta(text) == delta
    # Parsed after the operator's fragment, it resets ExecStart= and adds the environment.
    cat = ("# /etc/systemd/system/vllm-x.service\n[Service]\nEnvironment=NCCL_ALGO=Ring\n"
           "ExecStart=/opt/v/bin/vllm serve m --max-num-seqs 64\n\n"
           "# /etc/systemd/system/vllm-x.service.d/90-inferbot.conf\n" + text)
    unit = unitfile.parse_unit_cat(cat)
    assert unit.exec_start == ["/opt/v/bin/vllm", "serve", "m", "--max-num-seqs", "256"]
    assert unit.environment["W"] == '100% "$X"' and unit.environment["NCCL_PROTO"] == "Simple"


def test_not_ours_and_bad_input() -> None:
    assert dropin.read_delta("[Service]\nExecStart=/bin/true\n") is None
    assert dropin.read_delta(dropin.HEADER + "\n# inferbot-delta: {broken\n") is None
    with pytest.raises(ValueError):
        dropin.render("u.service", "/x.conf", ChangeSpec(), "a\nb", "#1")
    with pytest.raises(ValueError):
        dropin.render("u.service", "/x.conf", ChangeSpec(), None, "#1\nExecStartPre=/bin/evil")
    with pytest.raises(ValueError):
        dropin.environment_item("BAD NAME", "x")
