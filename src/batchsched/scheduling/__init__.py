"""The scheduling pass: pop, filter, score, post-filter, decide."""
