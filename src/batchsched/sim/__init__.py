"""The offline simulator: the scheduling core on a virtual clock, fed by a workload."""
