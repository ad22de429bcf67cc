"""The board: what it copies of the state (queues, the line of workloads with positions and
reasons, the GPU map), and what it never copies."""

from __future__ import annotations

from pathlib import Path

from batchsched.config import default_config
from batchsched.objects.load import load_files
from batchsched.ui.board import Board
from batchsched.ui.offline import SnapshotJudge
from batchsched.ui.publisher import Publisher
from tests.unit.ui.conftest import CLUSTER, NOW


def test_the_line_holds_each_workload_once_in_queue_order(board: Board) -> None:
    keys = [w.key for w in board.workloads]
    # nlp/urgent bound after preempting: it is not in the line. The gang is one workload,
    # at its first member's place (created 09:10, before the sweeps at 09:20-09:22).
    assert keys == ["vision/pretrain", "vision/sweep-0", "vision/sweep-1", "vision/sweep-2",
                    "ops/eval"]  # fmt: skip
    # With Queue objects the place across queues is chosen by fair share at each step.
    assert [w.position for w in board.workloads] == [0, 0, 0, 0, 0]
    assert [w.queue_position for w in board.workloads] == [1, 2, 3, 4, 1]
    gang = board.workload("vision/pretrain")
    assert gang is not None and gang.kind == "gang" and gang.min_member == 2
    assert gang.pods == ("vision/pretrain-0", "vision/pretrain-1")
    assert dict(gang.requests)["nvidia.com/gpu"] == 16  # both pending members


def test_reasons_are_the_schedulers_messages(board: Board) -> None:
    ops = board.workload("ops/eval")
    assert ops is not None and ops.reason == "queue ops: nvidia.com/gpu limit 8, in use 2, asks 8"
    gang = board.workload("vision/pretrain")
    assert gang is not None
    assert "topology example.com/rack: largest fit is rack-2 with 10 of 16" in gang.reason


def test_queues_carry_quotas_and_usage_parents_first(board: Board) -> None:
    assert [(q.name, q.depth) for q in board.queues] == [
        ("ops", 0), ("research", 0), ("nlp", 1), ("vision", 1)
    ]  # fmt: skip
    vision = board.queue("vision")
    assert vision is not None and vision.pending == 5 and vision.weight == 2
    (gpu,) = vision.quotas
    assert (gpu.guaranteed, gpu.nominal, gpu.limit, gpu.in_use, gpu.borrowed) == (8, 16, 64, 20, 4)
    assert gpu.fair_share == 28  # water-filled (docs/queues.md)


def test_the_gpu_map_groups_nodes_by_the_key_gangs_ask_for(board: Board) -> None:
    assert board.map_resource == "nvidia.com/gpu"
    assert board.domain_keys == ("example.com/rack",)
    assert [(n.name, n.domains, n.used, n.total) for n in board.nodes] == [
        ("gpu-1a", ("rack-1",), 8, 8), ("gpu-1b", ("rack-1",), 4, 8),
        ("gpu-1c", ("rack-1",), 8, 8), ("gpu-2a", ("rack-2",), 4, 8),
        ("gpu-2b", ("rack-2",), 2, 8), ("gpu-2c", ("rack-2",), 8, 8),
    ]  # fmt: skip


def test_a_plans_preemptions_name_both_sides_and_their_queues(board: Board) -> None:
    (p,) = board.preemptions
    assert (p.victim, p.victim_queue, p.preemptor, p.preemptor_queue, p.node) == (
        "nlp/serve-0", "nlp", "nlp/urgent", "nlp", "gpu-1c"
    )  # fmt: skip
    assert "PreemptionToleration" in p.rule and not p.reclaim
    assert board.events is None  # a snapshot has no history


def test_the_namespaces_named_are_those_of_workloads_and_preemptions(board: Board) -> None:
    assert board.namespaces() == {"vision", "ops", "nlp"}


def test_without_queues_the_whole_line_is_numbered(tmp_path: Path) -> None:
    documents = CLUSTER.read_text().split("\n---\n")
    kept = [d for d in documents if "kind: Queue" not in d and "kind: Namespace" not in d]
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text("\n---\n".join(kept))
    judge = SnapshotJudge(
        lambda: load_files([snapshot]), default_config(), NOW, [snapshot], False, Publisher()
    )
    judge.judge()
    board = judge.publisher.take()
    assert board is not None and not board.queues
    line = [(w.key, w.position, w.queue_position) for w in board.workloads]
    assert line == [("vision/pretrain", 1, 0), ("vision/sweep-0", 2, 0), ("vision/sweep-1", 3, 0),
                    ("vision/sweep-2", 4, 0), ("ops/eval", 5, 0)]  # fmt: skip
