"""scheduler_perf-style benchmarks: `python -m benchmarks [--workload PREFIX]`."""
