"""Cluster credentials found as kubectl finds them, read without the `kubernetes` package.

`--kubeconfig`, else the `KUBECONFIG` list of files (merged: the first file that names a
cluster, user or context wins, as does the first that sets current-context), else
`~/.kube/config`, else the pod's service account. Tokens (inline or `tokenFile`), basic auth,
client certificates and certificate authorities (files or inline data), insecure-skip-tls-verify,
tls-server-name and proxy-url are read here; a user with an `exec` plugin or an `auth-provider`
is handed to the `kubernetes` package, imported only then (it costs a few tenths of a second of
start-up, where every scheduler start waits on it).
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from batchsched.objects.errors import InputError

log = logging.getLogger(__name__)

DEFAULT_KUBECONFIG = Path("~/.kube/config")
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REFRESH = 60.0  # seconds between re-reads of a token file (rotated service account tokens)


class ConnectError(InputError):
    """No usable cluster credentials (kubeconfig or in-cluster)."""


class TokenFile:
    """A bearer token read from a file and read again once a minute, as client-go does: a
    projected service account token is rotated in place."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._token = self._read()
        self._read_at = clock()

    def _read(self) -> str:
        try:
            token = self.path.read_text().strip()
        except OSError as err:
            raise ConnectError(f"{self.path}: cannot read the token: {err.strerror}") from None
        if not token:
            raise ConnectError(f"{self.path}: the token file is empty")
        return token

    def __call__(self) -> str:
        with self._lock:
            if self._clock() - self._read_at >= TOKEN_REFRESH:
                try:
                    self._token = self._read()
                except ConnectError as err:  # keep the last good token; the server decides
                    log.warning("%s", err)
                self._read_at = self._clock()
            return self._token


@dataclass
class Credentials:
    """Where the API server is and how to prove who we are to it."""

    host: str
    verify: bool = True
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None  # PEM, loaded from memory (live/tls.py)
    key_data: bytes | None = None
    tls_server_name: str = ""
    proxy: str = ""
    token: str = ""
    token_file: TokenFile | None = None
    basic: str = ""  # "user:password"
    # Headers from the kubernetes package (exec plugins, auth providers), asked per request
    # so that it can refresh an expired credential.
    header_hook: Callable[[], Mapping[str, str]] | None = field(default=None, repr=False)

    def auth_headers(self) -> dict[str, str]:
        if self.header_hook is not None:
            return dict(self.header_hook())
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.token_file is not None:
            return {"Authorization": f"Bearer {self.token_file()}"}
        if self.basic:
            return {"Authorization": "Basic " + base64.b64encode(self.basic.encode()).decode()}
        return {}


def kubeconfig_source(kubeconfig: Path | None) -> list[Path] | None:
    """The kubeconfig files to read (kubectl's order), or None for in-cluster config."""
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise ConnectError(f"--kubeconfig {kubeconfig}: no such file")
        return [kubeconfig]
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        paths = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
        present = [p for p in paths if p.is_file()]
        if not present:
            raise ConnectError(f"KUBECONFIG={listed}: none of these files exists")
        return present
    if DEFAULT_KUBECONFIG.expanduser().is_file():
        return [DEFAULT_KUBECONFIG.expanduser()]
    return None


@dataclass(frozen=True)
class _Entry:
    """A named cluster, user or context, and the file it came from (relative paths in it are
    relative to that file's folder)."""

    value: Mapping[str, Any]
    origin: Path


_SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))


class _Merged:
    def __init__(self, files: list[Path]) -> None:
        self.files = files
        self.current = ""
        self.sections: dict[str, dict[str, _Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
        for path in files:
            self._read(path)

    def _read(self, path: Path) -> None:
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except OSError as err:
            raise ConnectError(f"{path}: cannot read: {err.strerror}") from None
        except yaml.YAMLError as err:
            raise ConnectError(f"{path}: not a kubeconfig: {err}") from None
        if not isinstance(raw, Mapping):
            raise ConnectError(f"{path}: not a kubeconfig: must be a mapping")
        if not self.current and isinstance(raw.get("current-context"), str):
            self.current = raw["current-context"]
        for section, singular in (
            ("clusters", "cluster"),
            ("users", "user"),
            ("contexts", "context"),
        ):
            entries = raw.get(section) or []
            if not isinstance(entries, list):
                raise ConnectError(f"{path}: {section} must be a list")
            for i, entry in enumerate(entries):
                if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                    raise ConnectError(f"{path}: {section}[{i}] needs a name")
                value = entry.get(singular) or {}
                if not isinstance(value, Mapping):
                    raise ConnectError(f"{path}: {section}[{i}].{singular} must be a mapping")
                self.sections[section].setdefault(entry["name"], _Entry(value, path))

    def entry(self, section: str, name: str, wanted_by: str) -> _Entry:
        found = self.sections[section].get(name)
        if found is None:
            where = ", ".join(map(str, self.files))
            raise ConnectError(f"{where}: {wanted_by} names {section[:-1]} {name!r}, not defined")
        return found


def _text(entry: _Entry, key: str) -> str:
    value = entry.value.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConnectError(f"{entry.origin}: {key} must be a string")
    return value


def _path(entry: _Entry, key: str) -> str | None:
    value = _text(entry, key)
    if not value:
        return None
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else entry.origin.parent.resolve() / path)


def _data(entry: _Entry, key: str) -> bytes | None:
    value = _text(entry, key)
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConnectError(f"{entry.origin}: {key} is not base64") from None


def from_kubeconfig(files: list[Path], context: str | None = None) -> Credentials:
    merged = _Merged(files)
    name = context or merged.current
    if not name:
        where = ", ".join(map(str, files))
        raise ConnectError(f"{where}: no current-context (pass --context NAME)")
    ctx = merged.entry("contexts", name, "--context" if context else "current-context")
    cluster_name, user_name = _text(ctx, "cluster"), _text(ctx, "user")
    cluster = merged.entry("clusters", cluster_name, f"context {name!r}")
    user = merged.entry("users", user_name, f"context {name!r}") if user_name else None
    if user is not None and ("exec" in user.value or "auth-provider" in user.value):
        return _through_kubernetes_package(files, name)
    server = _text(cluster, "server").rstrip("/")
    if not server:
        raise ConnectError(f"{cluster.origin}: cluster {cluster_name!r} has no server")
    insecure = cluster.value.get("insecure-skip-tls-verify") is True
    ca_data = _data(cluster, "certificate-authority-data")
    credentials = Credentials(
        host=server,
        verify=not insecure,
        ca_file=None if ca_data else _path(cluster, "certificate-authority"),
        ca_data=ca_data.decode() if ca_data else None,
        tls_server_name=_text(cluster, "tls-server-name"),
        proxy=_text(cluster, "proxy-url"),
    )
    if user is not None:
        _user_auth(credentials, user)
    return credentials


def _user_auth(credentials: Credentials, user: _Entry) -> None:
    credentials.cert_data = _data(user, "client-certificate-data")
    credentials.key_data = _data(user, "client-key-data")
    if credentials.cert_data is None:
        credentials.cert_file = _path(user, "client-certificate")
    if credentials.key_data is None:
        credentials.key_file = _path(user, "client-key")
    has_cert = credentials.cert_data or credentials.cert_file
    has_key = credentials.key_data or credentials.key_file
    if bool(has_cert) != bool(has_key):
        raise ConnectError(f"{user.origin}: a client certificate needs both certificate and key")
    # kubectl's order: an inline token, else the token file, else basic auth.
    credentials.token = _text(user, "token").strip()
    token_file = _path(user, "tokenFile")
    if not credentials.token and token_file:
        credentials.token_file = TokenFile(Path(token_file))
    username, password = _text(user, "username"), _text(user, "password")
    if username and password:
        credentials.basic = f"{username}:{password}"


def _through_kubernetes_package(files: list[Path], context: str) -> Credentials:
    """Exec plugins and auth providers: the kubernetes package runs them (and runs them again
    when the credential they gave expires)."""
    from kubernetes import config as kube_config
    from kubernetes.client import Configuration

    configuration = Configuration()
    try:
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.pathsep.join(map(str, files)),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except kube_config.ConfigException as err:
        raise ConnectError(f"{', '.join(map(str, files))}: {err}") from None

    def headers() -> dict[str, str]:
        # Reading the auth settings calls the package's refresh hook (a new exec run when the
        # credential expired).
        settings = cast(Mapping[str, Mapping[str, Any]], configuration.auth_settings())
        return {
            str(s["key"]).title(): str(s["value"])
            for s in settings.values()
            if s.get("in") == "header" and s.get("value")
        }

    return Credentials(
        host=str(configuration.host).rstrip("/"),
        verify=bool(configuration.verify_ssl),
        ca_file=configuration.ssl_ca_cert,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
        tls_server_name=configuration.tls_server_name or "",
        proxy=configuration.proxy or "",
        header_hook=headers,
    )


def in_cluster(environ: Mapping[str, str] | None = None, folder: Path | None = None) -> Credentials:
    """The pod's service account, as client-go's InClusterConfig reads it."""
    environ = os.environ if environ is None else environ
    folder = SERVICE_ACCOUNT if folder is None else folder
    host, port = (
        environ.get("KUBERNETES_SERVICE_HOST", ""),
        environ.get("KUBERNETES_SERVICE_PORT", ""),
    )
    if not host or not port:
        raise ConnectError(
            "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set "
            "(outside a cluster, pass --kubeconfig PATH or set KUBECONFIG)"
        )
    ca = folder / "ca.crt"
    if not ca.is_file():
        raise ConnectError(f"in-cluster config: {ca}: no such file")
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    return Credentials(
        host=f"https://{host}:{port}", ca_file=str(ca), token_file=TokenFile(folder / "token")
    )


def load_credentials(kubeconfig: Path | None, context: str | None = None) -> Credentials:
    """Credentials as kubectl finds them (see the module's docstring); `context` picks a
    kubeconfig context other than the current one."""
    files = kubeconfig_source(kubeconfig)
    if files is not None:
        credentials = from_kubeconfig(files, context)
    elif context is not None:
        raise ConnectError(
            f"--context {context}: no kubeconfig to find it in "
            "(pass --kubeconfig PATH or set KUBECONFIG)"
        )
    else:
        credentials = in_cluster()
    if not credentials.verify and credentials.host.startswith("https"):
        log.warning(
            "%s: TLS certificate verification is off (insecure-skip-tls-verify): "
            "the API server's identity is not checked",
            credentials.host,
        )
    return credentials
