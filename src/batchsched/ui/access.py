"""Who may read the web UI, and which namespaces' workloads each reader sees (docs/ui.md).

A request with a bearer token is authenticated by a TokenReview; its user sees the workloads
of the namespaces where a SubjectAccessReview allows it `list pods` (all of them when it may
list pods cluster-wide), and the queue totals and the node map whatever it may list. A request
without a token is served only from the networks in `anonymous_from` (loopback by default, for
`kubectl port-forward`), and sees everything. Answers are kept 10 seconds (DelegatedAuth).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from batchsched.live.delegated_auth import Refusal, User
from batchsched.objects.errors import InputError

LOOPBACK = ("127.0.0.0/8", "::1/128")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Viewer:
    """A reader: its name and the namespaces whose workloads it sees (None: all)."""

    name: str
    namespaces: frozenset[str] | None = None

    def sees(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces

    def sees_pod(self, key: str) -> bool:
        return self.sees(key.partition("/")[0])


def networks(cidrs: Iterable[str], flag: str) -> tuple[Network, ...]:
    """CIDRs (or plain addresses) read for `flag`, naming a bad one."""
    out = []
    for cidr in cidrs:
        try:
            out.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError:
            raise InputError(
                f"{flag}: {cidr!r} is not an address or network (e.g. 127.0.0.0/8, ::1/128, "
                "10.0.0.0/8)"
            ) from None
    return tuple(out)


def parse_networks(value: str, flag: str) -> tuple[Network, ...]:
    """A comma-separated list of CIDRs; empty: none."""
    return networks([c for c in value.split(",") if c.strip()], flag)


class Reviews(Protocol):
    """The API server's answers (live.delegated_auth.DelegatedAuth)."""

    def authenticate(self, authorization: str | None) -> User | Refusal: ...

    def may(self, user: User, attributes: dict[str, Any]) -> bool | None: ...


class Access:
    def __init__(
        self,
        anonymous_from: tuple[Network, ...] = networks(LOOPBACK, "default"),
        reviews: Reviews | None = None,
    ) -> None:
        """`reviews`: the API server's TokenReview and SubjectAccessReview (None offline,
        where no token can be checked)."""
        self.anonymous_from = anonymous_from
        self.reviews = reviews

    def viewer(
        self, authorization: str | None, client: str, namespaces: Iterable[str]
    ) -> Viewer | Refusal:
        """Who is asking from address `client`, and which of `namespaces` it sees."""
        if not authorization:
            if _within(client, self.anonymous_from):
                return Viewer("anonymous")
            return Refusal(
                401,
                "Unauthorized: send a bearer token (Authorization: Bearer ...); without one "
                "the UI answers only " + _where(self.anonymous_from),
            )
        if self.reviews is None:
            return Refusal(
                401,
                "Unauthorized: tokens cannot be checked here (no API server); without one the "
                "UI answers " + _where(self.anonymous_from),
            )
        user = self.reviews.authenticate(authorization)
        if isinstance(user, Refusal):
            return user
        everywhere = self.reviews.may(user, _list_pods(""))
        if everywhere is None:
            return Refusal(503, "Service Unavailable: the API server could not authorize")
        if everywhere:
            return Viewer(user.name)
        # Fail closed: a namespace the API server cannot answer for is not shown.
        seen = frozenset(n for n in sorted(namespaces) if self.reviews.may(user, _list_pods(n)))
        return Viewer(user.name, seen)


def _list_pods(namespace: str) -> dict[str, Any]:
    attributes = {"verb": "list", "resource": "pods", "version": "v1"}
    if namespace:
        attributes["namespace"] = namespace
    return {"resourceAttributes": attributes}


def _within(client: str, allowed: tuple[Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address(client.partition("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 on a dual-stack socket
    return any(address in network for network in allowed)


def _where(allowed: tuple[Network, ...]) -> str:
    if not allowed:
        return "to token holders"
    return "from " + ", ".join(str(n) for n in allowed)
