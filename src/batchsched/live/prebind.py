"""PreBind in live mode: the writes a pod's Binding waits for, one step per plugin that asked
for them at Reserve (decisions.PreBind), run in order on an actuator worker thread.

A step that fails undoes its own writes and raises PreBindError with upstream's wording
(`running PreBind plugin "VolumeBinding": ...`); the Binding is then not sent and the pod is
tried again. Volume bindings that succeeded before it are kept (a claim bound to a PV stays
bound, as upstream leaves it); DRA claims written are taken back, also when the Binding
fails (`run` returns that undo), as upstream's Unreserve does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from batchsched.decisions import BindVolumes, PreBind
from batchsched.live.claims import ClaimWriter, Consumer, PreBindFailed
from batchsched.live.client import KubeClient
from batchsched.live.volume_binder import BindingFailed, VolumeBinder


class PreBindError(Exception):
    pass


class PreBinder:
    def __init__(
        self,
        client: KubeClient,
        guard: Callable[[], bool],
        poll_seconds: float | None = None,
    ) -> None:
        self.stopping = threading.Event()  # set at shutdown: waits end, nothing is undone
        self._volumes = VolumeBinder(client, guard, self.stopping)
        self._claims = ClaimWriter(client, guard)
        if poll_seconds is not None:
            self._volumes.poll_seconds = poll_seconds

    def run(self, steps: Sequence[PreBind], pod: Consumer) -> Callable[[], None]:
        """Carry out the steps in order; the call that takes back what must not outlive a
        failed Binding."""
        undo: list[Callable[[], None]] = []
        try:
            for step in steps:
                if isinstance(step, BindVolumes):
                    try:
                        self._volumes.bind(step)
                    except BindingFailed as err:
                        raise PreBindError(
                            f'running PreBind plugin "VolumeBinding": {err}'
                        ) from None
                else:
                    try:
                        undo.append(self._claims.reserve(step, pod))
                    except PreBindFailed as err:
                        raise PreBindError(
                            f'running PreBind plugin "DynamicResources": {err}'
                        ) from None
        except BaseException:
            _undo(undo)
            raise
        return lambda: _undo(undo)


def _undo(steps: list[Callable[[], None]]) -> None:
    for undo in reversed(steps):
        undo()
