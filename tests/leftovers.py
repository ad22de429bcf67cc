"""What a scheduler still holds of pods that are gone: a walk of every object reachable from
a root (the scheduler, the live loop) for strings that name them.

Pods, their PodGroups and claims are given names with a marker; once they are all deleted,
any reachable string with the marker is something kept of them. Each is reported by the
path that reaches it (attributes, keys and indexes from the root, indexes as `[*]`), so a
failure names the container that keeps them.
"""

from __future__ import annotations

import gc
import types
from collections import Counter, deque
from typing import Any

# Caches that hold a snapshot of the cluster as of their last use (the victims of the last
# preemption search, the pod last asked about): replaced at their next use, so bounded by the
# pods the cluster held at once, not by every pod ever seen.
SNAPSHOTS = ("(VictimTable)", "(UnitIndex)", "(GangSearchMemo)", "(PodTopologySpread)._memo")


def outside_snapshots(found: Counter[str]) -> dict[str, int]:
    return {path: n for path, n in found.items() if not any(s in path for s in SNAPSHOTS)}


# Not followed: code and classes (names in them are the program's, not the cluster's), and
# the machinery of threads and sockets.
_OPAQUE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.CodeType,
    types.FrameType,
    types.MethodType,
)


def _step(parent: Any, child: Any) -> str:
    """How `parent` reaches `child`, in words a reader recognises."""
    if isinstance(parent, dict):
        for key, value in parent.items():
            if value is child:
                return f"[{key!r}]" if isinstance(key, str) and "/" not in key else "[*]"
            if key is child:
                return "<key>"
        return "[?]"
    if isinstance(parent, list | tuple | deque):
        return "[*]"
    if isinstance(parent, set | frozenset):
        return "{*}"
    attributes = getattr(parent, "__dict__", None)
    if attributes is child:
        return ""
    for name, value in (attributes or {}).items():
        if value is child:
            return f".{name}"
    for cls in type(parent).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if getattr(parent, slot, None) is child:
                return f".{slot}"
    return f"<{type(parent).__name__}>"


def holders(root: object, marker: str, strings: set[str] | None = None) -> Counter[str]:
    """Paths from `root` to strings containing `marker`, with how many strings each; the
    strings themselves are added to `strings`."""
    parents: dict[int, tuple[Any, Any] | None] = {id(root): None}
    found: Counter[str] = Counter()
    todo: deque[Any] = deque([root])
    while todo:
        obj = todo.popleft()
        if isinstance(obj, str):
            if marker in obj:
                found[_path(obj, parents)] += 1
                if strings is not None:
                    strings.add(obj)
            continue
        for child in gc.get_referents(obj):
            if id(child) in parents or isinstance(child, _OPAQUE):
                continue
            if isinstance(child, int | float | bytes | bool) or child is None:
                continue
            parents[id(child)] = (obj, child)
            todo.append(child)
    return found


def _path(obj: Any, parents: dict[int, tuple[Any, Any] | None]) -> str:
    links: list[tuple[Any, Any]] = []
    link = parents[id(obj)]
    while link is not None:
        links.append(link)
        link = parents[id(link[0])]
    out = [type(links[-1][0]).__name__ if links else type(obj).__name__]
    attribute = False  # the step before entered an object's __dict__
    for parent, child in reversed(links):
        step = _step(parent, child)
        if not step:
            attribute = True
            continue
        if attribute and step.startswith("['"):
            step = "." + step[2:-2]
        attribute = False
        out.append(step)
        if not isinstance(child, dict | list | tuple | set | frozenset | deque | str):
            out.append(f"({type(child).__name__})")
    return "".join(out)


def sizes(root: object) -> dict[str, int]:
    """The length of every container held in an attribute of `root` or of the project's
    objects reachable from it through attributes and containers of them, by path."""
    found: dict[str, int] = {}
    seen: set[int] = set()
    todo: deque[tuple[str, Any]] = deque([(type(root).__name__, root)])
    while todo:
        path, obj = todo.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        for name, value in _attributes(obj):
            here = f"{path}.{name}"
            if isinstance(value, dict | list | tuple | set | frozenset | deque):
                found[here] = len(value)
                for key, item in _items(value):
                    if _ours(item):
                        todo.append((f"{here}[{key}]", item))
            elif _ours(value):
                todo.append((here, value))
    return found


def _ours(obj: Any) -> bool:
    return type(obj).__module__.startswith("batchsched.") and not isinstance(obj, _OPAQUE)


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    out = list(getattr(obj, "__dict__", {}).items())
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                out.append((slot, getattr(obj, slot)))
    return out


def _items(container: Any) -> list[tuple[str, Any]]:
    if isinstance(container, dict):
        return [(repr(k) if isinstance(k, str) else "*", v) for k, v in container.items()]
    return [("*", v) for v in container]
