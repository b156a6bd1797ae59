""""What are current settings?": model, every flag, the environment, version, GPUs, warnings."""

from __future__ import annotations

from handlers.common import (
    STATE_STATUS,
    env_section,
    flag_rows,
    gpu_section,
    state_line,
    throughput_line,
    warnings_section,
)
from handlers.context import Context, Request
from handlers.live import cards_reply, service_cards
from handlers.reply import Reply, Section
from services.models import ServiceState
from services.node.probe import ProbeOptions
from services.parse.vllm_args import format_flag_value

# The live tok/s in the settings summary comes from vLLM's periodic stats line in the journal (no pause
# for two /metrics samples); "throughput" and "status" sample /metrics twice.
SETTINGS_PROBE = ProbeOptions(bench=True)


def flag_value(st: ServiceState, flag: str) -> str:
    """One flag's value as a person reads it ("(not set — vLLM's default)" when absent)."""
    if flag == "model":
        return st.model or "(none found)"
    if flag not in st.flags:
        return "(not set — vLLM's default applies)"
    return format_flag_value(st.flags[flag])


def service_sections(st: ServiceState, ctx: Context, focus: str | None = None, flag: str | None = None
                     ) -> list[Section]:
    """The full settings card of one service (or the focused part of it: ``focus="flag"`` and ``flag``)."""
    now = ctx.now()
    out = [Section(kind="header", title=f"{st.service} on {st.node}", status=STATE_STATUS[st.state]),
           Section(kind="text", text=state_line(st, now))]
    if st.state == "unreachable":
        w = warnings_section(st)
        return out + ([w] if w else [])
    if focus == "flag" and flag:
        source = "the running process" if st.settings_source == "process" else "the unit file"
        return [*out, Section(kind="fields", fields=[(f"--{flag}", flag_value(st, flag)), ("from", source)])]
    facts = [("unit", st.unit), ("model", st.model or "(none found)")]
    if st.main_pid:
        facts.append(("main PID", str(st.main_pid)))
    facts.append(("vLLM", st.version or "unknown (the server is not answering yet)"))
    if st.api_url:
        facts.append(("API", st.api_url))
    source = {"process": "the running process (/proc)", "unit": "the unit file (no running process read)",
              "cgroup-process": f"PID {st.settings_pid}, a process of the unit (the main one is a wrapper)",
              "vllm-log": "vLLM's start-up log (`non-default args`)", "api": "vLLM's API only (/v1/models)",
              "none": "nothing readable"}[st.settings_source]
    facts.append(("settings from", source))
    if st.api_max_model_len is not None and st.settings_source in ("api", "vllm-log"):
        facts.append(("max_model_len (/v1/models)", str(st.api_max_model_len)))
    if focus == "model":
        return [*out, Section(kind="fields", fields=facts[:2])]
    out.append(Section(kind="fields", fields=facts))
    if st.settings_note:
        out.append(Section(kind="context", text=st.settings_note))
    tp = throughput_line(st)
    if tp and focus is None:
        out.append(Section(kind="text", title="Throughput", text=tp))
    if focus in (None, "flags"):
        out += flag_rows(st)
        if st.settings_tried:
            out.append(Section(kind="text", title="Command line not readable — what was tried",
                               text="\n".join(f"• {t}" for t in st.settings_tried)))
        elif not st.flags and st.settings_source != "none":
            out.append(Section(kind="text", text="No flags besides the model."))
        # Wholly secret values already read "[redacted]"; say which others had a secret taken out.
        partly = [k for k in st.redacted_flags if st.flags.get(k) not in ("[redacted]", ["[redacted]"])]
        if partly:
            out.append(Section(kind="context", text="redacted (secrets inside): "
                               + ", ".join(f"--{k}" for k in partly)))
    if focus in (None, "env", "nccl"):
        env = env_section(st, "NCCL_" if focus == "nccl" else None)
        if env:
            out.append(env)
        elif focus:
            out.append(Section(kind="text", text="No such variables are set for this service."))
    if focus is None:
        g = gpu_section(st)
        if g:
            out.append(g)
    w = warnings_section(st)
    if w:
        out.append(w)
    return out


def env_facts(st: ServiceState, name: str) -> dict[str, object]:
    """One environment variable of one service: whether it is set, its (redacted) value and where it is set."""
    value = st.env.get(name)
    return {"service": st.service, "node": st.node, "set": value is not None, "value": value,
            "source": st.env_sources.get(name) if value is not None else None}


def env_sections(st: ServiceState, ctx: Context, name: str, expected: str | None) -> list[Section]:
    """The card of one service focused on one environment variable (and, when asked, whether it has a value)."""
    out = [Section(kind="header", title=f"{st.service} on {st.node}", status=STATE_STATUS[st.state]),
           Section(kind="text", text=state_line(st, ctx.now()))]
    if st.state == "unreachable":
        w = warnings_section(st)
        return out + ([w] if w else [])
    value = st.env.get(name)
    if value is None:
        text = f"{name} is not set for this service (neither in the unit nor in the running process)."
        if expected is not None:
            text = f"No — {text}"
        return [*out, Section(kind="text", text=text)]
    where = st.env_sources.get(name, "the service's environment")
    fields = [(name, value), ("set in", where)]
    if expected is not None:
        same = value == expected
        verdict = (f"Yes — {name}={value}." if same else f"No — {name} is {value}, not {expected}.")
        return [*out, Section(kind="text", text=verdict), Section(kind="fields", fields=fields)]
    return [*out, Section(kind="fields", fields=fields)]


async def handle(ctx: Context, req: Request) -> Reply:
    """Probe the targets and describe their settings (or one flag, or one environment variable, of them)."""
    focus, flag, env = req.args.focus, req.args.flag, req.args.env
    expected = req.args.value

    # The asked flag's (or variable's) value on each service, read while its record is still there (see
    # service_cards).
    values: list[dict[str, object]] = []

    def card(st: ServiceState, c: Context) -> list[Section]:
        if env:
            if st.state != "unreachable":
                values.append(env_facts(st, env))
            return env_sections(st, c, env, expected)
        if flag and st.state != "unreachable":
            values.append({"service": st.service, "node": st.node, "set": flag in st.flags or flag == "model",
                           "value": (st.model if flag == "model" else st.flags.get(flag))})
            if expected is not None:
                shown = flag_value(st, flag)
                same = _same_value(st.model if flag == "model" else st.flags.get(flag), expected)
                verdict = f"Yes — --{flag} is {shown}." if same else f"No — --{flag} is {shown}, not {expected}."
                return [*service_sections(st, c, focus, flag), Section(kind="text", text=verdict)]
        return service_sections(st, c, focus, flag)

    cards = await service_cards(ctx, req, SETTINGS_PROBE, card, record=True)
    if not cards.sections:
        none = "No services or nodes are configured — see the README's config reference."
        cards.sections.append(Section(kind="text", text=none))
    title = "Current settings" if not req.explicit_target else "Settings for " + ", ".join(
        dict.fromkeys([s.service for s in cards.services] or [n.name for n in req.nodes]))
    named = (" of " + ", ".join(dict.fromkeys(s.service for s in cards.services))
             if req.explicit_target and cards.services else "")
    if env:
        title = (f"{env}={expected}?" if expected is not None else env) + named
    elif flag:
        title = f"--{flag}" + named
    reply = cards_reply("settings", title, cards)
    if env:
        env_var: dict[str, object] = {"name": env, "values": values}
        if expected is not None:
            env_var["expected"] = expected
            env_var["matches"] = bool(values) and all(v["value"] == expected for v in values)
        reply.data["env_var"] = env_var
    elif flag:
        flag_data: dict[str, object] = {"name": flag, "values": values}
        if expected is not None:
            flag_data["expected"] = expected
            flag_data["matches"] = bool(values) and all(_same_value(v["value"], expected) for v in values)
        reply.data["flag"] = flag_data
    return reply


def _same_value(value: object, expected: str) -> bool:
    """A flag's value and the one asked about are the same ("0.95" and "0.950", "true" and a switch)."""
    if isinstance(value, list):
        return expected in [str(v) for v in value]
    if isinstance(value, bool):
        return expected.lower() in (("true", "on", "yes", "1") if value else ("false", "off", "no", "0"))
    if value is None:
        return False
    try:
        return float(str(value)) == float(expected)
    except ValueError:
        return str(value) == expected
