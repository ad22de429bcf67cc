"""The victim search shared by DefaultPreemption, PreemptionToleration, Coscheduling and
DaemonSetPreemption: who may be a victim (toleration policy, PDBs, gangs as one unit), which
nodes are candidates, and why a search found nothing."""
