"""Coscheduling: gang scheduling of PodGroups (SPEC section 4)."""

from batchsched.plugins.coscheduling.plugin import Coscheduling

__all__ = ["Coscheduling"]
