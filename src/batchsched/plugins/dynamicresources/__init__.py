"""DynamicResources: DRA claims with structured parameters (docs/dra.md)."""

from batchsched.plugins.dynamicresources.plugin import DynamicResources

__all__ = ["DynamicResources"]
