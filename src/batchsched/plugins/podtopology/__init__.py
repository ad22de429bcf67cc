"""PodTopology: a pod's own batchsched.io/topology-* annotations (docs/topology.md)."""

from batchsched.plugins.podtopology.plugin import PodTopology

__all__ = ["PodTopology"]
