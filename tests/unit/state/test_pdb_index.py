"""The PDB index answers as matching every PDB: namespaces, matchLabels pairs, selectors of
matchExpressions alone, and empty selectors (which cover no pod)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.records import LabelSelector, Pod, PodDisruptionBudget, Requirement
from batchsched.preemption.victim_table import VictimTable
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
        scanned = sorted(pdb.key for pdb in pdbs if covers(pdb, pod))
        assert sorted(index.covering(pod)) == scanned


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
    rows = np.array([state.node_index["n1"], state.node_index["n2"]], dtype=np.intp)
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
    index = state.pdb_index
    state.upsert_pdb(pdb("guard", {"app": "web"}, 0))
    assert state.pdb_index is index  # a status change keeps the index and the masks
    assert taken() == {"default/guard": (0, ["web"])}
    state.upsert_pdb(pdb("guard", {"app": "db"}, 0))
    assert state.pdb_index is not index
    assert taken() == {"default/guard": (0, ["db"])}
    state.remove_pdb("default/guard")
    assert taken() == {}
