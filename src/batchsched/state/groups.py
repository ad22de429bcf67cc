"""PodGroups and their members.

A pod names its PodGroup before or after the object exists: members are indexed by the
group's key either way. `version` moves, and the group is noted as changed for its status
controller (`drain_changes`), when the object, its set of members or a member's binding
changes.
"""

from __future__ import annotations

from batchsched.objects.records import PodGroup


class Groups:
    def __init__(self) -> None:
        self.by_key: dict[str, PodGroup] = {}
        # PodGroup key -> keys of every known member pod (any phase), whether or not the
        # PodGroup object exists yet.
        self.members: dict[str, set[str]] = {}
        self._member_of: dict[str, str] = {}
        self._changed: set[str] = set()
        self.version = 0
        # Moves when a group's stated runtime changes, which its members stating none read
        # (what is kept per pod shape reads it: docs/backfill.md).
        self.runtime_version = 0
        # PodGroup key -> why its object cannot be read (a field and what is allowed): live
        # mode leaves such an object out, and its members are told why they wait
        # (docs/input-limits.md#live-mode).
        self.unreadable: dict[str, str] = {}

    def upsert(self, group: PodGroup) -> None:
        self.by_key[group.key] = group
        self.unreadable.pop(group.key, None)
        self.changed(group.key)

    def remove(self, key: str) -> None:
        self.by_key.pop(key, None)
        self.unreadable.pop(key, None)
        self.changed(key)

    def index(self, key: str, group: str | None) -> None:
        """The pod `key` is now a member of `group` (None: of none)."""
        old = self._member_of.get(key)
        if old is not None:
            self.changed(old)
            if old != group:
                members = self.members[old]
                members.discard(key)
                if not members:
                    del self.members[old]
                del self._member_of[key]
        if group is not None:
            self._member_of[key] = group
            self.members.setdefault(group, set()).add(key)
            self.changed(group)

    def member_changed(self, key: str) -> None:
        """The pod `key` was bound or unbound: its group, if any, changed."""
        group = self._member_of.get(key)
        if group is not None:
            self.changed(group)

    def changed(self, group: str) -> None:
        self._changed.add(group)
        self.version += 1

    def drain_changes(self) -> set[str]:
        """PodGroup keys whose object or members changed since the last call."""
        changed = self._changed
        self._changed = set()
        return changed
