"""PodGroups and their members: membership follows each pod's report, changes are drained."""

from batchsched.objects.records import PodGroup
from batchsched.state.groups import Groups


def test_a_member_moves_between_groups_and_both_change() -> None:
    groups = Groups()
    groups.index("ns/a", "ns/g")
    groups.index("ns/b", "ns/g")
    assert groups.members == {"ns/g": {"ns/a", "ns/b"}}
    assert groups.drain_changes() == {"ns/g"} and groups.drain_changes() == set()
    version = groups.version
    groups.index("ns/a", "ns/h")
    assert groups.members == {"ns/g": {"ns/b"}, "ns/h": {"ns/a"}}
    assert groups.drain_changes() == {"ns/g", "ns/h"} and groups.version > version
    groups.index("ns/b", None)
    assert groups.members == {"ns/h": {"ns/a"}}  # an empty group is forgotten


def test_members_are_known_before_their_group_and_after_it_goes() -> None:
    groups = Groups()
    groups.index("ns/a", "ns/g")
    groups.drain_changes()
    groups.upsert(PodGroup("ns", "g", 1))
    groups.remove("ns/g")
    assert groups.by_key == {} and groups.members == {"ns/g": {"ns/a"}}
    assert groups.drain_changes() == {"ns/g"}
    groups.member_changed("ns/a")  # bound or unbound
    groups.member_changed("ns/lonely")  # in no group: nothing to tell
    assert groups.drain_changes() == {"ns/g"}
