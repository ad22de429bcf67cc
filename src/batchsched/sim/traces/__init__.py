"""Importers for real cluster traces: each turns a trace file into jobs (and maybe nodes)."""

from __future__ import annotations

from batchsched.sim.traces.common import TraceFormat
from batchsched.sim.traces.openb import OPENB
from batchsched.sim.traces.philly import PHILLY

TRACE_FORMATS: dict[str, TraceFormat] = {f.name: f for f in (PHILLY, OPENB)}

__all__ = ["TRACE_FORMATS", "TraceFormat"]
