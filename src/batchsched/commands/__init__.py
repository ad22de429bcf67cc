"""The commands people type (`schedule`, `explain`, `policy`) and how they print; `run` and
`simulate` live beside, in `live/` and `sim/`."""
