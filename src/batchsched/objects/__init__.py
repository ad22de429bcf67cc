"""Kubernetes objects as batchsched reads them: records, quantities, manifest readers."""
