"""The read-only web UI (docs/ui.md): boards of the scheduler's state, pages, access rules."""
