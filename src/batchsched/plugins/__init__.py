"""Scheduling plugins, one module each, named as in kube-scheduler's framework."""
