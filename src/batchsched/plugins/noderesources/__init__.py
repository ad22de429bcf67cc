"""The NodeResources plugins: NodeResourcesFit (fit.py, with its scoring strategies
least_allocated.py and most_allocated.py) and NodeResourcesBalancedAllocation
(balanced_allocation.py), sharing resource_allocation.py."""

from batchsched.plugins.noderesources.balanced_allocation import BalancedAllocation
from batchsched.plugins.noderesources.fit import NodeResourcesFit, insufficient_reason

__all__ = ["BalancedAllocation", "NodeResourcesFit", "insufficient_reason"]
