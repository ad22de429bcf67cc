"""One module per workload family; each registers its workloads with `@workload`."""
