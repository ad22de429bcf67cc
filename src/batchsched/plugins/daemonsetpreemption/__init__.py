"""DaemonSetPreemption: a DaemonSet pod whose node is full reserves it and frees room there."""
