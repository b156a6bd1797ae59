"""The recorded probe answers of the simulated Kimi node (``tests/samples/probe``), decoded by the probe's
wire parser: the inputs the node modules read. What the tests expect of them is read off the recordings."""

from __future__ import annotations

from pathlib import Path

from services.node.probe import NodeRaw, UnitRaw, parse_output

SAMPLES = Path(__file__).parents[3] / "samples"
KIMI_UNIT = "vllm-kimi-k25-int4.service"
KIMI_MAIN_PID = 23798  # MainPID= in settings-ready.out
KIMI_KEY = "sk-kimi-7f3a9c2e5b8d1f4a6c0e9b2d5f8a1c4e"  # VLLM_API_KEY in the recorded kimi.env


def node(name: str) -> NodeRaw:
    """``tests/samples/probe/<name>.out``, decoded."""
    return parse_output((SAMPLES / "probe" / f"{name}.out").read_text())


def unit(name: str) -> UnitRaw:
    """The Kimi unit's part of a recorded answer."""
    (u,) = node(name).units
    assert u.unit == KIMI_UNIT
    return u


def with_show(u: UnitRaw, **props: str) -> UnitRaw:
    """``u`` with ``systemctl show`` properties replaced, as systemd prints them."""
    lines = [x for x in u.show.splitlines() if x.split("=", 1)[0] not in props]
    return u.model_copy(update={"show": "\n".join([*lines, *(f"{k}={v}" for k, v in props.items())])})
