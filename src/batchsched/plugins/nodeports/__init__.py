"""NodePorts: host ports in use on each node."""
