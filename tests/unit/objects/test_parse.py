from pathlib import Path

import orjson
import pytest
import yaml

from batchsched.objects.errors import InputError, ManifestError
from batchsched.objects.load import load_files, load_text
from batchsched.objects.parse import read_node, read_pod
from batchsched.objects.volume_parse import read_storage_class
from tests.builders import node, pod, priority_class


def test_pod_request_is_max_of_containers_sum_and_each_init_plus_overhead() -> None:
    manifest = pod("p")
    manifest["spec"]["containers"] = [
        {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
        {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
    ]
    manifest["spec"]["initContainers"] = [
        {"name": "i1", "resources": {"requests": {"cpu": "2"}}},
        {"name": "i2", "resources": {"requests": {"memory": "512Mi", "nvidia.com/gpu": "1"}}},
    ]
    manifest["spec"]["overhead"] = {"cpu": "100m", "memory": "64Mi"}
    requests = read_pod(manifest).requests
    assert requests == {
        "cpu": 2100,
        "memory": 2**30 + 64 * 2**20,
        "nvidia.com/gpu": 1,
        "pods": 1,
    }


def test_limits_stand_in_for_missing_requests() -> None:
    manifest = pod("p", cpu=None, memory=None)
    manifest["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "2", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "1"},
    }
    assert read_pod(manifest).requests == {"cpu": 1000, "nvidia.com/gpu": 1, "pods": 1}


def test_multi_document_yaml_and_lists(tmp_path: Path) -> None:
    docs = [node("n1"), {"kind": "List", "items": [node("n2"), pod("p")]}, None]
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    objects = load_files([path])
    assert [n.name for n in objects.nodes] == ["n1", "n2"]
    assert [p.key for p in objects.pods] == ["default/p"]


def test_json_as_kubectl_prints_it(tmp_path: Path) -> None:
    path = tmp_path / "pods.json"
    path.write_text(orjson.dumps({"kind": "PodList", "items": [pod("a"), pod("b")]}).decode())
    assert [p.name for p in load_files([path]).pods] == ["a", "b"]


def test_unknown_kinds_are_ignored() -> None:
    text = yaml.safe_dump_all([{"kind": "ConfigMap", "metadata": {"name": "x"}}, node("n")])
    assert len(load_text(text, "f").nodes) == 1


def test_error_names_file_object_and_field() -> None:
    bad = pod("trainer", namespace="ml")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(ManifestError) as err:
        load_text(yaml.safe_dump(bad), "jobs.yaml")
    message = str(err.value)
    assert message.startswith("jobs.yaml: Pod ml/trainer: spec.containers")
    assert "'lots' is not a quantity" in message


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda m: m["spec"].pop("containers"), "spec.containers"),
        (lambda m: m["metadata"].pop("name"), "metadata.name"),
        (lambda m: m["spec"].update(priority="high"), "spec.priority"),
        (lambda m: m["spec"].update(tolerations=[{"operator": "Maybe"}]), "operator"),
        (lambda m: m["spec"].update(preemptionPolicy="Sometimes"), "spec.preemptionPolicy"),
        (
            lambda m: m["spec"].update(
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "k", "operator": "In"}]}
                            ]
                        }
                    }
                }
            ),
            "values",
        ),
    ],
)
def test_malformed_pods_name_the_field(mutate: object, field: str) -> None:
    manifest = pod("p")
    mutate(manifest)  # type: ignore[operator]
    with pytest.raises(ManifestError, match=field):
        read_pod(manifest)


def _node_affinity(values: list[object]) -> dict[str, object]:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": values}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


@pytest.mark.parametrize("value", [1, True, 1.5, ["a"], {"a": "b"}])
def test_selector_values_must_be_strings(value: object) -> None:
    """The API server decodes `values` into a Go []string: a number, a list or a mapping is
    refused there, never read as its Python text (a number would never match a label)."""
    manifest = pod("p")
    manifest["spec"]["affinity"] = _node_affinity(["z1", value])
    field = (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values[1]"
    )
    with pytest.raises(ManifestError, match=r"must be a string") as err:
        read_pod(manifest)
    assert err.value.field == field
    assert err.value.obj == "Pod default/p"


def test_a_null_selector_value_reads_as_empty() -> None:
    manifest = pod("p")
    manifest["spec"]["affinity"] = _node_affinity(["z1", None])
    [term] = read_pod(manifest).required_terms
    assert term.match_expressions[0].values == ("z1", "")


def test_storage_class_topology_values_must_be_strings() -> None:
    manifest = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fast"},
        "provisioner": "csi.example.com",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": [7]}]}],
    }
    with pytest.raises(ManifestError) as err:
        read_storage_class(manifest)
    assert err.value.field == "allowedTopologies[0].matchLabelExpressions[0].values[0]"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"preemptionPolicy": "Sometimes"},
            "spec.preemptionPolicy: 'Sometimes' is not one of PreemptLowerPriority, Never",
        ),
        ({"preemptionPolicy": ""}, None),  # empty: the class's policy applies
        (
            {"tolerations": [{"key": "k", "effect": "Soon"}]},
            "spec.tolerations[0].effect: 'Soon' is not one of NoSchedule, PreferNoSchedule, "
            "NoExecute",
        ),
        ({"tolerations": [{"key": "k", "effect": ""}]}, None),  # empty: every effect
        (
            {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
            "spec.topologySpreadConstraints[0].topologyKey: is required",
        ),
        ({"schedulingGates": [{"name": ""}]}, "spec.schedulingGates[0].name: is required"),
    ],
)
def test_required_and_enumerated_fields_say_what_is_allowed(
    spec: dict[str, object], message: str | None
) -> None:
    manifest = pod("p")
    manifest["spec"].update(spec)
    if message is None:
        read_pod(manifest)
        return
    with pytest.raises(ManifestError) as err:
        read_pod(manifest)
    assert message in str(err.value)


def test_priority_class_value_must_fit_int32() -> None:
    with pytest.raises(ManifestError, match="32-bit"):
        load_text(yaml.safe_dump(priority_class("huge", 2**31)), "pc.yaml")


def test_duplicate_objects_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump_all([node("n"), node("n")]))
    with pytest.raises(ManifestError, match="Node n: defined more than once"):
        load_files([path])


def test_not_yaml_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="bad.yaml: not valid YAML"):
        load_text("kind: [unclosed", "bad.yaml")


def test_scoring_counts_the_non_zero_defaults_per_container_that_requests_none() -> None:
    manifest = pod("p")
    manifest["spec"]["containers"] = [
        {"name": "a", "resources": {"requests": {"cpu": "1"}}},
        {"name": "b"},
        {"name": "c", "resources": {"requests": {"memory": "0"}}},  # explicit: no default
    ]
    manifest["spec"]["overhead"] = {"cpu": "50m"}
    parsed = read_pod(manifest)
    assert parsed.nonzero_requests == (1000 + 100 + 100 + 50, 200 * 2**20 + 200 * 2**20)
    assert parsed.requests.get("memory") is None


def test_images_and_preferred_terms_are_read() -> None:
    from batchsched.objects.parse import read_node

    manifest = pod("p")
    manifest["spec"]["initContainers"] = [{"name": "i", "image": "busybox"}]
    manifest["spec"]["containers"] = [
        {"name": "a", "image": "registry:5000/team/app"},
        {"name": "b", "image": "app@sha256:abc"},
    ]
    expr = {"key": "zone", "operator": "In", "values": ["a"]}
    manifest["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 7, "preference": {"matchExpressions": [expr]}},
                {"weight": 3, "preference": {}},  # selects nothing: dropped, as upstream
            ]
        }
    }
    parsed = read_pod(manifest)
    assert parsed.images == ("busybox:latest", "registry:5000/team/app:latest", "app@sha256:abc")
    assert [(t.weight, t.term.match_expressions[0].key) for t in parsed.preferred_terms] == [
        (7, "zone")
    ]
    raw = node("n")
    raw["status"]["images"] = [{"names": ["a:1", "a@sha256:x"], "sizeBytes": 10}]
    assert read_node(raw).images == {"a:1": 10, "a@sha256:x": 10}


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (-1, "status.images[0].sizeBytes: must be at least 0, got -1"),
        (2**63, "status.images[0].sizeBytes: must be at most 9223372036854775807"),
        ("10", "status.images[0].sizeBytes: must be an integer of at least 0, got '10'"),
        (True, "status.images[0].sizeBytes: must be an integer of at least 0, got True"),
    ],
)
def test_an_image_size_is_a_non_negative_int64(size: object, message: str) -> None:
    raw = node("n")
    raw["status"]["images"] = [{"names": ["a:1"], "sizeBytes": size}]
    with pytest.raises(ManifestError) as err:
        read_node(raw)
    assert message in str(err.value)


def test_a_preferred_term_weight_out_of_range_names_the_field() -> None:
    manifest = pod("p")
    manifest["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "preference": {}}]
        }
    }
    with pytest.raises(ManifestError) as err:
        read_pod(manifest)
    assert (
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be between 1 and 100, got 101" in str(err.value)
    )


@pytest.mark.parametrize(
    ("volumes", "field", "what"),
    [
        ("data", "spec.volumes", "must be a list, got 'data'"),
        (["data"], "spec.volumes[0]", "must be a mapping, got 'data'"),
        (
            [{"name": "d", "persistentVolumeClaim": "c"}],
            "spec.volumes[0].persistentVolumeClaim",
            None,
        ),
        ([{"name": "d", "ephemeral": True}], "spec.volumes[0].ephemeral", None),
        ([{"name": "d", "iscsi": ["iqn"]}], "spec.volumes[0].iscsi", None),
        ([{"name": "d", "gcePersistentDisk": "pd"}], "spec.volumes[0].gcePersistentDisk", None),
        ([{"name": 7, "emptyDir": {}}], "spec.volumes[0].name", "must be a string, got 7"),
    ],
)
def test_a_malformed_volume_is_refused_not_skipped(
    volumes: object, field: str, what: str | None
) -> None:
    """A volume source that is not a mapping used to be skipped, and the pod scheduled as if
    it named no claim or disk: now it is an error naming the field."""
    manifest = pod("p")
    manifest["spec"]["volumes"] = volumes
    with pytest.raises(ManifestError) as err:
        read_pod(manifest)
    assert (err.value.obj, err.value.field) == ("Pod default/p", field)
    assert err.value.what == (what or "must be a mapping, got " + repr(_source(volumes)))


def _source(volumes: object) -> object:
    assert isinstance(volumes, list)
    return next(v for k, v in volumes[0].items() if k != "name")


@pytest.mark.parametrize(
    ("where", "term"),
    [
        ("podAffinity", {"topologyKey": "zone", "namespaces": [7]}),
        ("podAffinity", {"topologyKey": "zone", "matchLabelKeys": [True]}),
        ("podAntiAffinity", {"topologyKey": "zone", "mismatchLabelKeys": [{"a": "b"}]}),
    ],
)
def test_pod_affinity_string_lists_refuse_other_items(where: str, term: dict[str, object]) -> None:
    manifest = pod("p")
    manifest["spec"]["affinity"] = {
        where: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    with pytest.raises(ManifestError, match="must be a string") as err:
        read_pod(manifest)
    listed = next(k for k in term if k != "topologyKey")
    assert (
        err.value.field
        == f"spec.affinity.{where}.requiredDuringSchedulingIgnoredDuringExecution[0].{listed}[0]"
    )


def test_spread_match_label_keys_refuse_other_items() -> None:
    manifest = pod("p")
    manifest["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "matchLabelKeys": [5],
        }
    ]
    with pytest.raises(ManifestError, match="must be a string") as err:
        read_pod(manifest)
    assert err.value.field == "spec.topologySpreadConstraints[0].matchLabelKeys[0]"
