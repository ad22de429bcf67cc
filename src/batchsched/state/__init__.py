"""The cluster as the scheduler sees it, and the queue of pods waiting for it."""
