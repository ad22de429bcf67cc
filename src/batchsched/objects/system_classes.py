"""The PriorityClasses every Kubernetes API server has: `system-node-critical` and
`system-cluster-critical`.

The API server creates them at start-up, refuses to delete them and refuses any other value
or `globalDefault` for their names, so a pod may name one in a cluster that never shows the
class object (a `kubectl get pods` snapshot has the pods only). They are neither the global
default nor `preemptionPolicy: Never` (see docs/preemption-toleration.md#built-in-classes).
"""

from __future__ import annotations

from collections.abc import Iterable

from batchsched.objects.records import PriorityClass

SYSTEM_CLASSES: dict[str, PriorityClass] = {
    pc.name: pc
    for pc in (
        PriorityClass("system-node-critical", 2_000_001_000),
        PriorityClass("system-cluster-critical", 2_000_000_000),
    )
}


def system_class_error(name: str, value: int, global_default: bool) -> tuple[str, str] | None:
    """The field and what is allowed when a class of a built-in's name differs from it (the
    API server would refuse it), else None."""
    builtin = SYSTEM_CLASSES.get(name)
    if builtin is None:
        return None
    if value != builtin.value:
        return "value", f"must be {builtin.value}, the built-in class's value"
    if global_default != builtin.global_default:
        return "globalDefault", "must be false for a built-in class"
    return None


def used_system_classes(
    defined: Iterable[PriorityClass], named: Iterable[str]
) -> list[PriorityClass]:
    """The built-in classes among `named` that `defined` does not hold, by name."""
    have = {pc.name for pc in defined}
    return [SYSTEM_CLASSES[name] for name in sorted(set(named) - have) if name in SYSTEM_CLASSES]
