"""QueueSort: the scheduling queue's order (PrioritySort)."""
