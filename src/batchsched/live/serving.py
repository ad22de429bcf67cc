"""Which endpoints `batchsched run` serves, and how (docs/live.md, Endpoints).

By default HTTPS on `--bind-address`:`--secure-port` (0.0.0.0:10259, kube-scheduler's
convention) with a mounted or self-signed certificate and /metrics behind TokenReview and
SubjectAccessReview. `--listen HOST:PORT` serves plain HTTP without authentication, in place of
HTTPS unless `--secure-port` is also given.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from batchsched.live.client import KubeClient
from batchsched.live.delegated_auth import DelegatedAuth
from batchsched.live.health import HealthServer
from batchsched.live.tls import ServingCertificate
from batchsched.objects.errors import InputError
from batchsched.ui.access import LOOPBACK, Access, Network, networks
from batchsched.ui.publisher import Publisher
from batchsched.ui.site import Site

SECURE_PORT = 10259


@dataclass(frozen=True)
class ServingOptions:
    bind_address: str = "0.0.0.0"
    secure_port: int | None = None  # None: SECURE_PORT unless `listen` is set; 0: no HTTPS
    cert_file: Path | None = None
    key_file: Path | None = None
    listen: str = ""  # HOST:PORT of plain HTTP, no authentication
    ui: bool = True  # the web UI's pages on the same ports (docs/ui.md)
    ui_anonymous_from: tuple[Network, ...] = networks(LOOPBACK, "--ui-allow-from")
    ui_poll: float = 2.0

    @property
    def https_port(self) -> int:
        if self.secure_port is not None:
            return self.secure_port
        return 0 if self.listen else SECURE_PORT


@dataclass(frozen=True)
class Probes:
    """What the endpoints report: the scheduler's metrics and probe answers."""

    metrics: Callable[[], bytes]
    healthy: Callable[[], bool]
    ready: Callable[[], bool]


def certificate(options: ServingOptions) -> ServingCertificate:
    if (options.cert_file is None) != (options.key_file is None):
        raise InputError("--tls-cert-file and --tls-private-key-file must be given together")
    try:
        return ServingCertificate(options.cert_file, options.key_file)
    except (OSError, ssl.SSLError) as err:
        raise InputError(
            f"--tls-cert-file {options.cert_file} / --tls-private-key-file {options.key_file}: "
            f"cannot load the certificate and key: {err}"
        ) from None


def endpoints(
    options: ServingOptions,
    probes: Probes,
    client: KubeClient,
    boards: Publisher | None = None,
) -> list[HealthServer]:
    """The servers to start (not started yet); `client`'s credentials ask the API server who
    may read /metrics over HTTPS, and who reads the web UI's pages (from `boards`, when
    `options.ui`)."""
    port = options.https_port
    if port < 0 or port > 65535:
        raise InputError(f"--secure-port: {port} is not a port (0-65535; 0: no HTTPS)")
    # Reviews go on a client of their own: no rate limit shared with the binds.
    auth = DelegatedAuth(KubeClient(client.credentials, retries=1))
    pages = None
    if options.ui and boards is not None:
        pages = Site(boards, Access(options.ui_anonymous_from, auth), options.ui_poll)
    servers = []
    if port:
        servers.append(
            HealthServer(
                f"{options.bind_address}:{port}",
                probes.metrics,
                probes.healthy,
                probes.ready,
                certificate=certificate(options),
                auth=auth,
                flag="--bind-address/--secure-port",
                pages=pages,
            )
        )
    if options.listen:
        servers.append(
            HealthServer(options.listen, probes.metrics, probes.healthy, probes.ready, pages=pages)
        )
    return servers
