"""InterPodAffinity: pods placed near (affinity) or away from (anti-affinity) other pods."""

from batchsched.plugins.interpodaffinity.plugin import InterPodAffinity

__all__ = ["InterPodAffinity"]
