"""Topology in the simulator (docs/simulate.md#topology): rack and block labels generated on a
pool's nodes, a gang job's topology request, and the domains a started gang spans.

A pool's `topology` lists levels, narrowest first: the first groups `size` consecutive nodes
into one domain of its key, each next level groups `size` domains of the level before, e.g.
`[{key: example.com/rack, size: 8}, {key: example.com/block, size: 4}]`: racks of 8 nodes,
blocks of 4 racks. A domain's label value is `<pool>-<key's name>-<index>` (`gpu-rack-03`).

A gang job's `topology` asks for one of `required: <key>`, `preferred: [<key>, ...]` (as
docs/topology.md), or only `key: <key>` (placed as any gang, its span measured); `slowdown`
scales its run time by that factor per extra domain of the (first) key its pods span when it
starts: 1.3 makes a gang over 3 racks run 1.3 ** 2 = 1.69 times as long, the cost of
collective operations across the spine that a compact gang avoids.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from batchsched.objects.errors import shown
from batchsched.objects.numbers import number
from batchsched.objects.records import Node, TopologyRequest
from batchsched.objects.topology import label_key_problem
from batchsched.sim.fields import REQUIRED, Fields, positive_int
from batchsched.sim.workload import NO_JOB_TOPOLOGY, JobTopology


def label_key(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a node label key, got {shown(value)}")
    problem = label_key_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _keys(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a list of node label keys, narrowest first, got {shown(value)}")
    keys = tuple(label_key(key) for key in value)
    if len(set(keys)) != len(keys):
        raise ValueError(f"names a key twice: {shown(value)}")
    return keys


def _slowdown(value: Any) -> float:
    return number(value, 1.0, 100.0)


def pool_labels(pool: Fields, name: str, count: int) -> list[dict[str, str]]:
    """Per node of the pool, in order, the labels its `topology` levels give it."""
    levels: list[tuple[str, int]] = []
    for i, raw in enumerate(pool.items("topology")):
        level = Fields(pool.source, raw, pool.path(f"topology[{i}]"), ("key", "size"))
        key = level.value("key", label_key, REQUIRED)
        if key in (k for k, _ in levels):
            raise level.fail("key", f"{key} is a level already")
        levels.append((key, level.value("size", positive_int, REQUIRED)))
    out: list[dict[str, str]] = [{} for _ in range(count)]
    span = 1
    for key, size in levels:
        span *= size
        domains = (count + span - 1) // span
        width = max(2, len(str(domains - 1)))
        short = key.rpartition("/")[2]
        for n, labels in enumerate(out):
            labels[key] = f"{name}-{short}-{n // span:0{width}d}"
    return out


def job_topology(f: Fields, gang: bool) -> JobTopology:
    """A job template's `topology` (see the module's doc)."""
    if not f.has("topology"):
        return NO_JOB_TOPOLOGY
    t = Fields(
        f.source,
        f.raw["topology"],
        f.path("topology"),
        ("required", "preferred", "key", "slowdown"),
    )
    if not gang:
        raise f.fail("topology", "only a gang job (gang: true or minMember) has a topology")
    given = [name for name in ("required", "preferred", "key") if t.has(name)]
    if len(given) != 1:
        raise t.fail("", f"give one of required, preferred and key, got {given or 'none'}")
    required = t.value("required", label_key, "")
    preferred = t.value("preferred", _keys, ())
    key = required or (preferred[0] if preferred else t.value("key", label_key, REQUIRED))
    slowdown = t.value("slowdown", _slowdown, 1.0)
    return JobTopology(TopologyRequest(required, preferred), key, slowdown)


def domains_spanned(nodes: Iterable[Node | None], key: str) -> int:
    """How many domains of `key` these nodes make: each label value once, each node without
    the label on its own."""
    values: set[str] = set()
    outside = 0
    for node in nodes:
        if node is None:
            continue
        value = node.labels.get(key)
        if value is None:
            outside += 1
        else:
            values.add(value)
    return len(values) + outside
