"""LiveContended serves the cluster Contended schedules: its API objects read back as the
generated records (start times moved to the live clock)."""

from __future__ import annotations

from datetime import timedelta

import orjson

from batchsched.objects.load import load_text
from benchmarks.workloads import contended
from benchmarks.workloads.live_contended import manifests


def test_the_manifests_read_back_as_the_generated_objects() -> None:
    generated = contended.generate(40, 5)
    later = contended.NOW + timedelta(hours=3)
    items = [obj for _, obj in manifests(generated, later)]
    read = load_text(orjson.dumps({"kind": "List", "items": items}).decode(), "live")

    def pods(objects: contended.Objects, shift: timedelta) -> list[tuple[object, ...]]:
        return [
            (
                p.key,
                p.requests,
                p.priority,
                p.priority_class_name,
                p.node_name,
                p.labels,
                p.start_time + shift if p.start_time else None,
            )
            for p in objects.pods
        ]

    assert pods(read, timedelta()) == pods(generated, later - contended.NOW)
    assert [(n.name, n.allocatable, n.labels) for n in read.nodes] == [
        (n.name, n.allocatable, n.labels) for n in generated.nodes
    ]
    assert read.pdbs == generated.pdbs
    assert [(g.key, g.min_member) for g in read.pod_groups] == [
        (g.key, g.min_member) for g in generated.pod_groups
    ]
    assert [(c.name, c.value, c.annotations) for c in read.priority_classes] == [
        (c.name, c.value, c.annotations) for c in generated.priority_classes
    ]
