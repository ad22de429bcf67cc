"""Who may read /metrics over HTTPS: authentication and authorization delegated to the API
server, as kube-scheduler does it (docs/live.md, Endpoints).

A bearer token is checked with a TokenReview; the user it names (or `system:anonymous` when
the request carries none) must be allowed `get` on the non-resource URL (`/metrics`) by a
SubjectAccessReview. Answers are kept for `ttl` seconds (kube-scheduler's defaults: 10 s for
tokens, allowed and denied decisions), so a Prometheus scraping every few seconds costs the API
server two small requests per scraper every ten seconds.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from batchsched.live.client import ApiError, KubeClient

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ANONYMOUS = "system:anonymous"
_MAX_KEPT = 1024  # answers kept at most (expired ones are dropped first)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is not served: 401 (not authenticated), 403 (not allowed) or 500 (the
    API server could not say)."""

    status: int
    message: str


ANONYMOUS_USER = User(ANONYMOUS, groups=("system:unauthenticated",))


class _Kept:
    """Answers by key until they expire, at most _MAX_KEPT of them."""

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._answers: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> Any:
        with self._lock:
            kept = self._answers.get(key)
            if kept is None or kept[0] <= self.clock():
                return None
            return kept[1]

    def put(self, key: Any, answer: Any) -> None:
        now = self.clock()
        with self._lock:
            if len(self._answers) >= _MAX_KEPT:
                self._answers = {k: v for k, v in self._answers.items() if v[0] > now}
                while len(self._answers) >= _MAX_KEPT:
                    del self._answers[next(iter(self._answers))]
            self._answers[key] = (now + self.ttl, answer)


class DelegatedAuth:
    def __init__(
        self, client: KubeClient, ttl: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self._users = _Kept(ttl, clock)
        self._decisions = _Kept(ttl, clock)

    def check(self, authorization: str | None, path: str) -> Refusal | None:
        """None if the request with this Authorization header may `get` `path`."""
        user = self.authenticate(authorization)
        if isinstance(user, Refusal):
            return user
        return self._authorize(user, path)

    def authenticate(self, authorization: str | None) -> User | Refusal:
        """The user a request's Authorization header names (TokenReview), `system:anonymous`
        without one, or why not (401)."""
        if not authorization:
            return ANONYMOUS_USER
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Refusal(401, "Unauthorized: only bearer tokens are accepted")
        # Kept under the token's digest: the token itself stays out of memory dumps.
        key = hashlib.sha256(token.encode()).digest()
        kept = self._users.get(key)
        if kept is not None:
            return kept  # type: ignore[no-any-return]
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            status = self.client.json("POST", TOKEN_REVIEWS, body=review, timeout=10.0)["status"]
        except (ApiError, KeyError, TypeError) as err:
            log.warning("TokenReview failed: %s", err)
            return Refusal(401, "Unauthorized: the token could not be reviewed")
        answer: User | Refusal
        if status.get("authenticated"):
            raw = status.get("user") or {}
            extra = raw.get("extra") or {}
            answer = User(
                str(raw.get("username", "")),
                str(raw.get("uid", "")),
                tuple(raw.get("groups") or ()),
                tuple(sorted((k, tuple(v)) for k, v in extra.items())),
            )
        else:
            answer = Refusal(401, "Unauthorized")
        self._users.put(key, answer)
        return answer

    def _authorize(self, user: User, path: str) -> Refusal | None:
        allowed = self.may(user, {"nonResourceAttributes": {"path": path, "verb": "get"}})
        if allowed is None:
            return Refusal(500, "Internal Server Error: the request could not be authorized")
        if not allowed:
            return Refusal(403, f'Forbidden: user "{user.name}" cannot get path "{path}"')
        return None

    def may(self, user: User, attributes: dict[str, Any]) -> bool | None:
        """Whether a SubjectAccessReview allows `user` what `attributes` name (its
        `resourceAttributes` or `nonResourceAttributes`); None if the API server cannot say
        (not kept: asked again next time)."""
        key = (user, repr(sorted(attributes.items())))
        kept = self._decisions.get(key)
        if kept is not None:
            return bool(kept)
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups), **attributes}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        try:
            status = self.client.json("POST", ACCESS_REVIEWS, body=review, timeout=10.0)["status"]
        except (ApiError, KeyError, TypeError) as err:
            log.warning("SubjectAccessReview for %s failed: %s", user.name, err)
            return None
        allowed = bool(status.get("allowed"))
        self._decisions.put(key, allowed)
        return allowed
