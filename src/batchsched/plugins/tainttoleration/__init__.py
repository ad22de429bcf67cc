"""TaintToleration: taints a pod must tolerate, and the score of the soft ones."""
