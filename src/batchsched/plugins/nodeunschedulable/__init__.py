"""NodeUnschedulable: cordoned nodes, unless tolerated."""
