"""Coscheduling: gang scheduling of PodGroups (docs/gang.md)."""

from batchsched.plugins.coscheduling.plugin import Coscheduling

__all__ = ["Coscheduling"]
