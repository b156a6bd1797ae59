"""bot/demo.py: ``inferbot demo`` — the built-in simulated cluster on loopback, asked as ``inferbot ask`` would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.demo import run_demo
from tests.unit.handlers.test_charts import png_size


async def test_demo_draws_its_throughput_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "demo.png"
    assert await run_demo("chart throughput qwen", True, png=str(png)) == 0
    data = json.loads(capsys.readouterr().out)["data"]
    assert len(data["points"]) > 600 and [r["event"] for r in data["restarts"]] == ["restart.executed"]
    rates = [p["generation_tps"] for p in data["points"]]
    assert rates.count(None) == 1  # the first sample after the restart has no rate (its counters started at 0)
    assert png_size(png.read_bytes()) == (1000, 500)


async def test_the_demo_shows_a_load_in_progress_and_a_busy_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert await run_demo("what are current settings?", True) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["intent"] == "settings"
    kimi, qwen = out["data"]["services"]
    # 13 minutes into a 30-minute load; the ETA comes from the seeded history of the previous load (30m 02s).
    assert (kimi["service"], kimi["node"], kimi["state"], kimi["phase"]) == ("kimi", "gpu-a", "loading",
                                                                             "loading_weights")
    assert kimi["eta_basis"] == "history" and 15 * 60 < kimi["eta_seconds"] < 19 * 60
    assert kimi["flags"]["tensor-parallel-size"] == "8" and kimi["flags"]["api-key"] == ["[redacted]"]
    assert (qwen["service"], qwen["node"], qwen["state"]) == ("qwen", "gpu-b", "ready")
    assert qwen["throughput"]["generation_tps"] == 900.0
    assert f"~{round(kimi['eta_seconds'] / 60)} min remaining" in out["text"]
