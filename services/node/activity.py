"""What a unit is doing now: load progress and its ETA, traffic (and a hang it shows), the served models, the
recent log lines, the benchmark results."""

from __future__ import annotations

from services.models import BenchSummary, LoadProgress, ServiceState, UnitShow
from services.node.api_facts import served_models
from services.node.node_facts import NodeFacts
from services.node.parse_cache import bench_records
from services.node.probe import UnitRaw
from services.node.throughput import read_traffic
from services.parse import bench as bench_parser
from services.redact import Redactor


def add_activity(st: ServiceState, raw: UnitRaw, journal: str, progress: LoadProgress, show: UnitShow,
                 facts: NodeFacts, redactor: Redactor) -> None:
    """Fill in what the unit is doing now (see the module) onto ``st``."""
    _load(st, progress)
    traffic = read_traffic(raw, journal, facts)
    st.metrics, st.throughput = traffic.sample, traffic.throughput
    t = st.throughput
    if (
        st.state == "ready" and t is not None and t.source == "metrics" and (t.running or 0) > 0
        and t.generation_tps is not None and t.generation_tps == 0
    ):
        # /health only says the engine process is alive; a hung engine still answers 200.
        st.warnings.append(
            f"possibly hung: {t.running} request(s) running but no tokens generated during the sample window"
        )
    if raw.models is not None and (raw.models_keyed or raw.models.status == 200):
        st.served_models, st.models_error = served_models(raw.models)
        if st.models_error:
            st.warnings.append(st.models_error)
    if raw.logs is not None:
        # Split on newlines only: a tqdm update starts with a carriage return but is part of its line.
        # One call for all lines, so a PEM key spread over several journal lines goes whole.
        st.logs = redactor.lines([line.replace("\r", " ").rstrip() for line in raw.logs.split("\n") if line.strip()])
    st.need_daemon_reload = show.need_daemon_reload
    if raw.bench_files:
        records: list[dict[str, object]] = []
        for path, text in raw.bench_files.items():
            records += bench_records(path, text)
        st.bench = bench_parser.summarize_bench(records)
    elif raw.bench_dir is not None:
        st.bench = BenchSummary()


def _load(st: ServiceState, progress: LoadProgress) -> None:
    """How far a load is, and tqdm's own estimate of the time left for the weights."""
    if progress.total and st.state in ("loading", "starting"):
        fraction = round(progress.fraction or 0, 3)
        st.progress = {"done": progress.done or 0, "total": progress.total, "fraction": fraction}
    if st.state == "loading" and progress.phase == "loading_weights" and progress.weights_remaining_s is not None:
        # tqdm's own estimate for the shards left; the phases after the weights are added from history
        # by the handler when the store knows them.
        st.eta_seconds, st.eta_basis = progress.weights_remaining_s, "shard_rate"
