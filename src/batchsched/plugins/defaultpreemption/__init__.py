"""DefaultPreemption: kube-scheduler's post-filter preemption."""
