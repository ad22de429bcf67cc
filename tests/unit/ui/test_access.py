"""Who reads the web UI: a token's user sees the namespaces where it may list pods (all with a
cluster-wide grant); without a token, only the allowed networks are served; the API server
failing or not knowing a token refuses the request."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.live.delegated_auth import Refusal, User
from batchsched.objects.errors import InputError
from batchsched.ui.access import Access, Viewer, parse_networks

ALICE = User("alice", groups=("system:authenticated",))


class Reviews:
    """The API server's answers: tokens by value, `list pods` grants by namespace ("" for
    cluster-wide); `broken` namespaces cannot be answered for."""

    def __init__(self, grants: set[str], broken: set[str] | None = None) -> None:
        self.grants = grants
        self.broken = broken or set()
        self.asked: list[str] = []

    def authenticate(self, authorization: str | None) -> User | Refusal:
        return ALICE if authorization == "Bearer alice-token" else Refusal(401, "Unauthorized")

    def may(self, user: User, attributes: dict[str, Any]) -> bool | None:
        wanted = attributes["resourceAttributes"]
        assert (wanted["verb"], wanted["resource"]) == ("list", "pods")
        namespace = wanted.get("namespace", "")
        self.asked.append(namespace)
        if namespace in self.broken:
            return None
        return namespace in self.grants


NAMESPACES = ["nlp", "ops", "vision"]


def test_without_a_token_only_loopback_is_served_and_sees_everything() -> None:
    access = Access()
    assert access.viewer(None, "127.0.0.1", NAMESPACES) == Viewer("anonymous")
    assert access.viewer(None, "::1", NAMESPACES) == Viewer("anonymous")
    assert access.viewer(None, "::ffff:127.0.0.1", NAMESPACES) == Viewer("anonymous")
    refused = access.viewer(None, "10.0.0.7", NAMESPACES)
    assert isinstance(refused, Refusal) and refused.status == 401
    assert "127.0.0.0/8" in refused.message


def test_the_networks_served_without_a_token_are_configurable() -> None:
    access = Access(parse_networks("10.0.0.0/8", "--ui-allow-from"))
    assert access.viewer(None, "10.1.2.3", NAMESPACES) == Viewer("anonymous")
    assert isinstance(access.viewer(None, "127.0.0.1", NAMESPACES), Refusal)
    nobody = Access(parse_networks("", "--ui-allow-from"))
    assert isinstance(nobody.viewer(None, "127.0.0.1", NAMESPACES), Refusal)
    with pytest.raises(InputError, match="--ui-allow-from: 'ten' is not an address or network"):
        parse_networks("127.0.0.1,ten", "--ui-allow-from")


def test_a_token_cannot_be_checked_without_an_api_server() -> None:
    refused = Access().viewer("Bearer alice-token", "127.0.0.1", NAMESPACES)
    assert isinstance(refused, Refusal) and refused.status == 401


def test_an_unknown_token_is_refused() -> None:
    refused = Access(reviews=Reviews({""})).viewer("Bearer stolen", "127.0.0.1", NAMESPACES)
    assert isinstance(refused, Refusal) and refused.status == 401


def test_a_user_sees_the_namespaces_where_it_may_list_pods() -> None:
    reviews = Reviews({"nlp"})
    viewer = Access(reviews=reviews).viewer("Bearer alice-token", "10.0.0.7", NAMESPACES)
    assert viewer == Viewer("alice", frozenset({"nlp"}))
    assert isinstance(viewer, Viewer) and viewer.sees("nlp") and not viewer.sees("ops")
    assert reviews.asked == ["", "nlp", "ops", "vision"]  # cluster-wide first


def test_a_cluster_wide_grant_sees_all_at_one_question() -> None:
    reviews = Reviews({""})
    viewer = Access(reviews=reviews).viewer("Bearer alice-token", "10.0.0.7", NAMESPACES)
    assert viewer == Viewer("alice") and reviews.asked == [""]


def test_a_user_without_grants_still_sees_the_queue_totals() -> None:
    viewer = Access(reviews=Reviews(set())).viewer("Bearer alice-token", "10.0.0.7", NAMESPACES)
    assert viewer == Viewer("alice", frozenset())


def test_namespaces_the_api_server_cannot_answer_for_are_not_shown() -> None:
    reviews = Reviews({"nlp", "ops"}, broken={"ops"})
    viewer = Access(reviews=reviews).viewer("Bearer alice-token", "10.0.0.7", NAMESPACES)
    assert viewer == Viewer("alice", frozenset({"nlp"}))
    down = Access(reviews=Reviews(set(), broken={""}))
    refused = down.viewer("Bearer alice-token", "10.0.0.7", NAMESPACES)
    assert isinstance(refused, Refusal) and refused.status == 503
