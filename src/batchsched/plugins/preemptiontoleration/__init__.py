"""PreemptionToleration: a victim-side policy on PriorityClasses (docs/preemption-toleration.md)."""
