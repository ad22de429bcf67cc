"""The PDB index answers as matching every PDB: namespaces, matchLabels pairs, `In`
expressions, selectors of other matchExpressions alone, and empty selectors (which cover no
pod); its answers kept per pod follow pods and PDBs as they change and leave; a pod is
matched only against the PDBs filed under a requirement its labels meet."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.records import LabelSelector, Pod, PodDisruptionBudget, Requirement
from batchsched.preemption.victim_table import VictimTable
from batchsched.state import pdb_index
from batchsched.state.cluster import ClusterState
from batchsched.state.pdb_index import PdbIndex, covers
from tests.preemption_world import node, pdb, pod, state_of

NAMESPACES = st.sampled_from(["default", "team"])
KEYS = st.sampled_from(["app", "tier", "zone"])
VALUES = st.sampled_from(["a", "b", "c"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=3)
REQUIREMENTS = st.builds(
    Requirement,
    KEYS,
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    st.lists(VALUES, max_size=2, unique=True).map(tuple),
)
SELECTORS = st.builds(LabelSelector, LABELS, st.lists(REQUIREMENTS, max_size=2).map(tuple))


@st.composite
def budgets(draw: st.DrawFn) -> list[PodDisruptionBudget]:
    pdbs = []
    for i in range(draw(st.integers(0, 6))):
        pdbs.append(PodDisruptionBudget(draw(NAMESPACES), f"pdb-{i}", draw(SELECTORS), 1))
    return pdbs


@settings(max_examples=150, deadline=None)
@given(budgets(), st.lists(st.tuples(NAMESPACES, LABELS), max_size=6))
def test_index_answers_as_the_full_scan(
    pdbs: list[PodDisruptionBudget], pods: list[tuple[str, dict[str, str]]]
) -> None:
    index = PdbIndex(pdbs)
    for i, (namespace, labels) in enumerate(pods):
        pod = Pod(namespace=namespace, name=f"p{i}", labels=labels)
        scanned = tuple(sorted(pdb.key for pdb in pdbs if covers(pdb, pod)))
        assert index.covering(pod) == scanned
        assert index.covering(pod) == scanned  # the kept answer


def test_selector_of_expressions_alone_and_empty_selector() -> None:
    exists = LabelSelector({}, (Requirement("app", "Exists", ()),))
    pdbs = [
        PodDisruptionBudget("default", "any-app", exists, 1),
        PodDisruptionBudget("default", "everything", LabelSelector({}, ()), 1),
        PodDisruptionBudget("team", "web", LabelSelector({"app": "web"}, ()), 1),
    ]
    index = PdbIndex(pdbs)
    assert index.covering(Pod(namespace="default", name="x", labels={"app": "web"})) == (
        "default/any-app",
    )
    assert index.covering(Pod(namespace="team", name="y", labels={"app": "web"})) == ("team/web",)
    assert index.covering(Pod(namespace="team", name="z", labels={})) == ()


def test_victim_table_follows_pdb_changes() -> None:
    """The table's masks follow PDBs added, re-selected and removed; a new disruptions
    allowed is read from the state without rebuilding the masks."""
    state = state_of(
        node("n1"),
        node("n2"),
        pod("web", 1000, on="n1", labels={"app": "web"}),
        pod("db", 1000, on="n2", labels={"app": "db"}),
        pod("other", 1000, on="n2"),
    )
    table = VictimTable(state)
    table.sync()
    rows = np.array([state.nodes.row_of["n1"], state.nodes.row_of["n2"]], dtype=np.intp)
    take = np.ones((2, table.slots), dtype=np.bool_)

    def taken() -> dict[str, tuple[int, list[str]]]:
        found = {}
        for budget, covered in table.pdbs_taken(rows, take):
            pods = [table.pods[int(rows[i])][s].name for i, s in np.argwhere(covered).tolist()]
            found[budget.key] = (budget.disruptions_allowed, pods)
        return found

    assert taken() == {}
    state.upsert_pdb(pdb("guard", {"app": "web"}, 1))
    assert taken() == {"default/guard": (1, ["web"])}
    index = state.policy.pdb_index
    state.upsert_pdb(pdb("guard", {"app": "web"}, 0))
    assert state.policy.pdb_index is index  # a status change keeps the index and the masks
    assert taken() == {"default/guard": (0, ["web"])}
    state.upsert_pdb(pdb("guard", {"app": "db"}, 0))
    assert state.policy.pdb_index is not index
    assert taken() == {"default/guard": (0, ["db"])}
    state.remove_pdb("default/guard")
    assert taken() == {}


def test_rows_changed_after_a_new_pdb_wait_for_the_masks_of_the_new_index() -> None:
    state = state_of(node("n1"), pod("web", 1000, on="n1", labels={"app": "web"}))
    state.upsert_pdb(pdb("old", {"app": "web"}, 1))
    table = VictimTable(state)
    table.sync()
    rows = np.array([0], dtype=np.intp)
    take = np.ones((1, table.slots), dtype=np.bool_)
    assert [b.name for b, _ in table.pdbs_taken(rows, take)] == ["old"]
    # A new PDB (a new index) and a row changed before the masks are next used.
    state.upsert_pdb(pdb("new", {"app": "web"}, 1))
    state.upsert_pod(pod("web-2", 1000, on="n1", labels={"app": "web"}))
    table.sync()
    take = np.ones((1, table.slots), dtype=np.bool_)
    assert [b.name for b, _ in table.pdbs_taken(rows, take)] == ["new", "old"]


# One step on a cluster state: a PDB put or removed, a pod put (new labels, or moved to
# another namespace) or removed.
STEPS = st.one_of(
    st.tuples(st.just("pdb"), st.integers(0, 4), NAMESPACES, SELECTORS),
    st.tuples(st.just("drop-pdb"), st.integers(0, 4)),
    st.tuples(st.just("pod"), st.integers(0, 5), NAMESPACES, LABELS),
    st.tuples(st.just("drop-pod"), st.integers(0, 5), NAMESPACES),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(STEPS, max_size=25))
def test_kept_answers_follow_changes(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    """After every change, the state's index answers for every pod as a scan of every PDB."""
    state = ClusterState()
    state.upsert_node(node("n1"))
    for step in steps:
        if step[0] == "pdb":
            _, i, namespace, selector = step
            state.remove_pdb(f"{'team' if namespace == 'default' else 'default'}/pdb-{i}")
            state.upsert_pdb(PodDisruptionBudget(namespace, f"pdb-{i}", selector, 1))
        elif step[0] == "drop-pdb":
            for namespace in ("default", "team"):
                state.remove_pdb(f"{namespace}/pdb-{step[1]}")
        elif step[0] == "pod":
            _, i, namespace, labels = step
            state.upsert_pod(Pod(namespace=namespace, name=f"p{i}", labels=dict(labels)))
        else:
            state.remove_pod(f"{step[2]}/p{step[1]}")
        for each in state.pods.by_key.values():
            scanned = tuple(sorted(k for k, b in state.policy.pdbs.items() if covers(b, each)))
            assert state.policy.pdb_index.covering(each) == scanned


def test_a_pod_is_matched_against_the_pdbs_of_its_shard_only() -> None:
    """Fifty PDBs share `app: trainer` and differ by `shard In [...]`: a pod is matched
    against its shard's PDB alone, once while it stays the same record, and again when it
    changes or comes back after leaving."""
    pdbs = [
        PodDisruptionBudget(
            "default",
            f"trainer-{i}",
            LabelSelector({"app": "trainer"}, (Requirement("shard", "In", (f"s{i}",)),)),
            1,
        )
        for i in range(50)
    ]
    state = ClusterState()
    for budget in pdbs:
        state.upsert_pdb(budget)
    trainer = Pod(namespace="default", name="t", labels={"app": "trainer", "shard": "s7"})
    state.upsert_pod(trainer)
    matched = []

    def counted(budget: PodDisruptionBudget, each: Pod) -> bool:
        matched.append(budget.key)
        return covers(budget, each)

    with patch.object(pdb_index, "covers", counted):
        assert state.policy.pdb_index.covering(trainer) == ("default/trainer-7",)
        assert state.policy.pdb_index.covering(trainer) == ("default/trainer-7",)
        assert matched == ["default/trainer-7"]
        moved = Pod(namespace="default", name="t", labels={"app": "trainer", "shard": "s8"})
        state.upsert_pod(moved)
        assert state.policy.pdb_index.covering(moved) == ("default/trainer-8",)
        state.remove_pod(moved.key)
        state.upsert_pod(trainer)
        assert state.policy.pdb_index.covering(trainer) == ("default/trainer-7",)
        assert matched == ["default/trainer-7", "default/trainer-8", "default/trainer-7"]


def test_a_pod_that_leaves_leaves_no_answer_behind() -> None:
    """A live scheduler sees pods come and go: the index keeps answers for present pods only."""
    state = state_of(node("n1"), pod("web", 1000, on="n1", labels={"app": "web"}))
    state.upsert_pdb(pdb("guard", {"app": "web"}, 1))
    web = state.pods.by_key["default/web"]
    assert state.policy.pdb_index.covering(web) == ("default/guard",)
    assert set(state.policy.pdb_index._memo) == {web.key}
    state.remove_pod(web.key)
    assert state.policy.pdb_index._memo == {}
