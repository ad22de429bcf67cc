"""PodTopologySpread: spread matching pods evenly over topology domains (zones, nodes)."""

from batchsched.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = ["PodTopologySpread"]
