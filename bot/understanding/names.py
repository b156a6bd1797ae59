"""Which words name a service or a node: exact names, their other names, variants and typos of them.

Known names are the config's services, nodes and units, and each service's served model names and model
paths (from the store, or from the probe of this very question; ``aliases``). A variant is a distinctive
part of one of those (``k2.5`` of ``kimi-k2.5``, ``qwen3`` of ``Qwen/Qwen3-32B``). A typo is one edit away
(two for long names), never in a digit or a short suffix: ``gpu-c`` is another node, not a typo of ``gpu-a``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from config.models import BotConfig, Node, Service

Aliases = Mapping[str, Sequence[Service]]
# Parts of model names and units that say nothing about which service it is. (A quantisation, "int4", does
# when one service's names have it: "the int4 one".)
_GENERIC = frozenset(
    "vllm service services model models shared opt data srv var lib home hf huggingface instruct chat base it "
    "latest main v1 v2 serve server api inferbot moe dense hub cache snapshots weights ckpt checkpoints "
    "checkpoint".split()
)
_SPLIT = re.compile(r"[-_/ ]+")
_SQUEEZE = re.compile(r"[-_.]")


@dataclass(frozen=True)
class Target:
    """What one word named."""

    word: str
    services: tuple[Service, ...] = ()
    nodes: tuple[Node, ...] = ()
    how: str = "exact"  # exact | alias | variant | typo


@dataclass
class NameIndex:
    """Every name people may type for the configured services and nodes, and how to match a word to them."""

    services: dict[str, list[Service]] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    aliases: dict[str, list[Service]] = field(default_factory=dict)
    variants: dict[str, list[Service]] = field(default_factory=dict)

    @classmethod
    def build(cls, config: BotConfig, aliases: Aliases | None = None) -> NameIndex:
        """The index for ``config`` plus ``aliases`` (served names and model paths, lower-case keys)."""
        index = cls()
        for s in config.services:
            index.services.setdefault(s.name.lower(), []).append(s)
        index.nodes = {n.name.lower(): n for n in config.nodes}
        index.aliases = {k: list(v) for k, v in service_aliases(config).items()}
        for key, found in (aliases or {}).items():
            have = index.aliases.setdefault(key, [])
            ids = {id(s) for s in have}  # identity: comparing whole models is quadratic in a fleet
            have += [s for s in found if id(s) not in ids]
        index._build_variants()
        return index

    def _build_variants(self) -> None:
        owners: dict[str, set[int]] = {}
        by_id: dict[int, Service] = {}
        names: Iterable[tuple[str, list[Service]]] = [*self.aliases.items(), *self.services.items()]
        for alias, found in names:
            for part in _parts(alias):
                for s in found:
                    owners.setdefault(part, set()).add(id(s))
                    by_id[id(s)] = s
        exact = set(self.services) | set(self.nodes) | set(self.aliases)
        for part, ids in owners.items():
            services = [by_id[i] for i in ids]
            # A part is a variant only when it points at one service name (on any number of nodes).
            if part not in exact and len({s.name for s in services}) == 1:
                self.variants[part] = services

    def known(self) -> list[str]:
        """Every exact name (for suggestions)."""
        return [*self.services, *self.nodes]

    def exact(self, word: str) -> Target | None:
        """The service, node or alias ``word`` is exactly (case and a trailing ``.service`` aside)."""
        w = word.lower().strip("/")
        if w in self.services:
            return Target(word, services=tuple(self.services[w]))
        if w in self.nodes:
            return Target(word, nodes=(self.nodes[w],))
        for key in (w, w.rsplit("/", 1)[-1]):
            if key in self.aliases:
                return Target(word, services=tuple(self.aliases[key]), how="alias")
        # "gpua", "gpu_b", "gpu.a": a name with its joiner left out or another one typed.
        squeezed = _SQUEEZE.sub("", w)
        for n in self.nodes:
            if _SQUEEZE.sub("", n) == squeezed:
                return Target(word, nodes=(self.nodes[n],), how="typo")
        for n in self.services:
            if _SQUEEZE.sub("", n) == squeezed:
                return Target(word, services=tuple(self.services[n]), how="typo")
        # "kimi" picks "kimi-k25" when it is the only service name starting that way.
        starts = [n for n in self.services if n.startswith(w + "-")]
        if len(w) >= 3 and len(starts) == 1:
            return Target(word, services=tuple(self.services[starts[0]]), how="variant")
        return None

    def variant(self, word: str) -> Target | None:
        """A distinctive part of one service's names (``k2.5``, ``k25``, ``qwen3``, ``32b``)."""
        w = word.lower().strip("/")
        for key in (w, w.replace(".", "")):
            if key in self.variants:
                return Target(word, services=tuple(self.variants[key]), how="variant")
        return None

    def typo(self, word: str) -> Target | None:
        """A name ``word`` is a misspelling of: one edit (two from 8 letters on), same digits, same short parts."""
        from rapidfuzz.distance import OSA  # only a word that names nothing exactly pays for the import

        w = word.lower()
        if len(w) == 3 and w.isalpha():
            # A four-letter name with a letter left out inside ("kmi", "qwn"); never its first or last letter
            # ("kim" is a person).
            short = [n for n in self.services if len(n) == 4 and n[0] == w[0] and n[-1] == w[-1]
                     and any(n[:i] + n[i + 1:] == w for i in (1, 2))]
            return Target(word, services=tuple(self.services[short[0]]), how="typo") if len(short) == 1 else None
        if len(w) < 4:
            return None
        best: tuple[int, str] | None = None
        for name in [*self.services, *self.nodes]:
            # A letter typed twice ("gpu-aa", "kimii"), in a short part too.
            if len(w) == len(name) + 1 and any(w[i] == w[i - 1] and w[:i] + w[i + 1:] == name
                                               for i in range(1, len(w))):
                found = self.exact(name)
                return None if found is None else Target(word, found.services, found.nodes, how="typo")
        for name in [*self.services, *self.nodes, *self.variants]:
            if abs(len(name) - len(w)) > 2 or not _same_shape(w, name):
                continue
            if len(name) <= 4 and len(w) == len(name) and sorted(w) != sorted(name) and not _next_key(w, name):
                continue  # a short name with one letter changed is another word ("qwer"), not a typo
            d = OSA.distance(w, name, score_cutoff=2)
            if d <= (2 if len(name) >= 8 else 1) and (best is None or d < best[0]):
                best = (d, name)
        if best is None:
            return None
        name = best[1]
        if name in self.services:
            return Target(word, services=tuple(self.services[name]), how="typo")
        if name in self.nodes:
            return Target(word, nodes=(self.nodes[name],), how="typo")
        return Target(word, services=tuple(self.variants[name]), how="typo")

    def find(self, word: str) -> Target | None:
        """Exact, then variant, then typo."""
        return self.exact(word) or self.variant(word) or self.typo(word)

    def suggest(self, word: str, limit: int = 2) -> list[str]:
        """Known names that look like ``word`` (for "did you mean …?")."""
        from rapidfuzz import fuzz, process

        known = self.known()
        found = process.extract(word.lower(), known, scorer=fuzz.ratio, limit=limit, score_cutoff=55)
        return [name for name, _, _ in found]


_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_KEY_AT = {ch: (r, c) for r, row in enumerate(_ROWS) for c, ch in enumerate(row)}


def _next_key(word: str, name: str) -> bool:
    """``word`` is ``name`` with one letter after the first hit on a neighbouring key ("qweb", "kimo")."""
    diff = [(a, b) for a, b in zip(word, name, strict=True) if a != b]
    if len(diff) != 1 or word[0] != name[0] or diff[0][0] not in _KEY_AT or diff[0][1] not in _KEY_AT:
        return False
    (r1, c1), (r2, c2) = _KEY_AT[diff[0][0]], _KEY_AT[diff[0][1]]
    # Rows are staggered: a key touches the one beside it and the two under or over it.
    return (r1 == r2 and abs(c1 - c2) == 1) or (abs(r1 - r2) == 1 and c1 - c2 in ((0, -1) if r1 > r2 else (0, 1)))


def _digits(word: str) -> str:
    return "".join(ch for ch in word if ch.isdigit())


def _same_shape(word: str, name: str) -> bool:
    """A typo keeps the digits and every short part (``gpu-c`` is not ``gpu-a``, ``qwen9`` is not ``qwen``)."""
    if _digits(word) != _digits(name):
        return False
    a, b = word.split("-"), name.split("-")
    if len(a) != len(b):
        return False
    return all(x == y for x, y in zip(a, b, strict=True) if len(x) <= 2 or len(y) <= 2)


def _parts(alias: str) -> set[str]:
    """The distinctive parts of a name: each piece between separators, and adjacent pieces joined."""
    pieces = [p for p in _SPLIT.split(alias.lower().strip("/").removesuffix(".service")) if p]
    out: set[str] = set()
    for i in range(len(pieces)):
        for j in range(i + 1, min(len(pieces), i + 3) + 1):
            part = "-".join(pieces[i:j])
            if part == alias.lower().strip("/"):
                continue
            if len(part) >= 2 and any(ch.isalpha() for ch in part) and part not in _GENERIC:
                if j - i == 1 and not any(ch.isdigit() for ch in part) and len(part) < 4:
                    continue  # a short bare word ("ai") says nothing
                out.add(part)
                if "." in part:
                    out.add(part.replace(".", ""))
                    major = part.split(".")[0]  # "k2" of "k2.5"
                    if j - i == 1 and any(ch.isalpha() for ch in major) and any(ch.isdigit() for ch in major):
                        out.add(major)
    return out


def service_aliases(config: BotConfig, served: Mapping[tuple[str, str], Sequence[str]] | None = None
                    ) -> dict[str, list[Service]]:
    """Other names people type for a service: its unit (with and without ``.service``), and the served
    model names and model paths (and their basenames) in ``served`` (``(service, node)`` → names, e.g.
    from the last snapshots in the store). Keys are lower-case, without a leading ``/``."""
    out: dict[str, list[Service]] = {}
    # Configured services are distinct (one name per node), so identity tells them apart: a membership test by
    # equality compared whole pydantic models, quadratic in a fleet whose nodes all run the same unit.
    seen: set[tuple[str, int]] = set()

    def add(alias: str, svc: Service) -> None:
        key = alias.strip().lower().strip("/")
        if key and (key, id(svc)) not in seen:
            seen.add((key, id(svc)))
            out.setdefault(key, []).append(svc)

    for svc in config.services:
        add(svc.unit, svc)
        add(svc.unit.removesuffix(".service"), svc)
        for name in (served or {}).get((svc.name, svc.node), ()):
            add(name, svc)
            add(name.rstrip("/").rsplit("/", 1)[-1], svc)
    return out
