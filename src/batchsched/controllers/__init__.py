"""What every world does after a decision (docs/architecture.md): PodGroup status, DRA claim
release, the steps after a pod is gone, and the one dispatcher the worlds register their
handlers with. The worlds use the core through these and through `scheduling`; never a
plugin's internals."""

from __future__ import annotations

from batchsched.controllers.dispatch import Dispatcher
from batchsched.controllers.podgroups import PodGroupStatusController, current_warnings
from batchsched.controllers.pods import pod_gone
from batchsched.scheduling.scheduler import Scheduler

__all__ = ["Controllers", "Dispatcher", "PodGroupStatusController", "current_warnings", "pod_gone"]


class Controllers:
    """The controllers a world runs beside its scheduler, and the world's dispatcher."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.pod_groups = PodGroupStatusController(scheduler.state)
        # PodGroups have a status only where a profile schedules groups (Coscheduling).
        if scheduler.group_plugins:
            scheduler.after_pass.append(self.pod_groups.after_pass)
        self.dispatcher = Dispatcher()
