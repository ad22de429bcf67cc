"""Every plugin batchsched knows, by name, and the default profile's plugin set."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from batchsched.framework.interface import Plugin
from batchsched.plugins.backfill.plugin import Backfill
from batchsched.plugins.coscheduling import Coscheduling
from batchsched.plugins.daemonsetpreemption.plugin import DaemonSetPreemption
from batchsched.plugins.defaultpreemption.plugin import DefaultPreemption
from batchsched.plugins.dynamicresources import DynamicResources
from batchsched.plugins.imagelocality.plugin import ImageLocality
from batchsched.plugins.interpodaffinity import InterPodAffinity
from batchsched.plugins.nodeaffinity.plugin import NodeAffinity
from batchsched.plugins.nodename.plugin import NodeName
from batchsched.plugins.nodeports.plugin import NodePorts
from batchsched.plugins.noderesources import BalancedAllocation, NodeResourcesFit
from batchsched.plugins.nodeunschedulable.plugin import NodeUnschedulable
from batchsched.plugins.podtopology import PodTopology
from batchsched.plugins.podtopologyspread import PodTopologySpread
from batchsched.plugins.preemptiontoleration.plugin import PreemptionToleration
from batchsched.plugins.queues import Queues
from batchsched.plugins.queuesort.priority_sort import PrioritySort
from batchsched.plugins.tainttoleration.plugin import TaintToleration
from batchsched.plugins.volumebinding import (
    NodeVolumeLimits,
    VolumeBinding,
    VolumeRestrictions,
    VolumeZone,
)

PluginFactory = Callable[[Mapping[str, Any] | None], Plugin]


def _no_args(cls: type[Plugin]) -> PluginFactory:
    def build(args: Mapping[str, Any] | None) -> Plugin:
        if args and any(k not in ("kind", "apiVersion") for k in args):
            from batchsched.plugins.args import ArgsError

            raise ArgsError(cls.name, "", "this plugin takes no arguments")
        return cls()

    return build


REGISTRY: dict[str, PluginFactory] = {
    "PrioritySort": _no_args(PrioritySort),
    "NodeUnschedulable": _no_args(NodeUnschedulable),
    "NodeName": _no_args(NodeName),
    "TaintToleration": _no_args(TaintToleration),
    "NodeAffinity": NodeAffinity,
    "NodePorts": _no_args(NodePorts),
    "NodeResourcesFit": NodeResourcesFit,
    "NodeResourcesBalancedAllocation": BalancedAllocation,
    "ImageLocality": _no_args(ImageLocality),
    "PodTopologySpread": PodTopologySpread,
    "InterPodAffinity": InterPodAffinity,
    "DynamicResources": _no_args(DynamicResources),
    "Coscheduling": Coscheduling,
    "DefaultPreemption": DefaultPreemption,
    "PreemptionToleration": PreemptionToleration,
    "DaemonSetPreemption": DaemonSetPreemption,
    "Backfill": Backfill,
    "VolumeRestrictions": _no_args(VolumeRestrictions),
    "NodeVolumeLimits": _no_args(NodeVolumeLimits),
    "VolumeBinding": VolumeBinding,
    "VolumeZone": _no_args(VolumeZone),
    "Queues": Queues,
    "PodTopology": _no_args(PodTopology),
}

EXTENSION_POINTS = ("queueSort", "preFilter", "filter", "postFilter", "score", "reserve", "permit")

# The `batchsched` profile: every plugin on, at every point it implements, in
# kube-scheduler's order. Score entries are (name, weight).
DEFAULT_PLUGINS: dict[str, list[tuple[str, int]]] = {
    "queueSort": [("Coscheduling", 0)],
    # Coscheduling's PreFilter is left out: its Permit hook admits whole groups itself, so
    # the PreFilter would only cost every other pod a call (it is for profiles without it).
    # Queues: quota admission (docs/queues.md); a cluster without Queue objects skips it.
    "preFilter": [("DaemonSetPreemption", 0), ("VolumeBinding", 0), ("Queues", 0)],
    "filter": [
        ("NodeUnschedulable", 0),
        ("NodeName", 0),
        ("TaintToleration", 0),
        ("NodeAffinity", 0),
        ("PodTopology", 0),  # a pod's own topology annotations (docs/topology.md)
        # Last of the static filters (its shape is None for pods with claims, so the
        # others stay cached for them); earlier than upstream's place in the order.
        ("DynamicResources", 0),
        # Before NodeResourcesFit: a reserved node must fail unresolvably for other pods.
        ("DaemonSetPreemption", 0),
        # Also before NodeResourcesFit: room reserved for a waiting gang is not preempted
        # for (docs/backfill.md).
        ("Backfill", 0),
        ("NodePorts", 0),
        ("NodeResourcesFit", 0),
        ("VolumeRestrictions", 0),
        ("NodeVolumeLimits", 0),
        ("VolumeBinding", 0),
        ("VolumeZone", 0),
        ("PodTopologySpread", 0),
        ("InterPodAffinity", 0),
    ],
    # DaemonSetPreemption first: it alone acts on DaemonSet pods (the others skip them).
    # Queues: reclaim across queues, once priority preemption inside the queue found no way.
    "postFilter": [("DaemonSetPreemption", 0), ("PreemptionToleration", 0), ("Queues", 0)],
    # kube-scheduler's default weights, in its order.
    "score": [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("VolumeBinding", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("PodTopology", 2),  # as NodeAffinity's preferred terms
        # For pods stating a runtime: nodes about to empty are left to empty
        # (docs/backfill.md, "Where other pods go").
        ("Backfill", 2),
    ],
    "reserve": [("VolumeBinding", 0), ("DynamicResources", 0)],
    "permit": [("Coscheduling", 0)],
}
