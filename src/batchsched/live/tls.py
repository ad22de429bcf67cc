"""TLS material held in memory: certificate chains loaded without a file on disk, and the
serving certificate of `batchsched run`'s HTTPS endpoints (docs/live.md, Endpoints).

Python's ssl loads a chain only from a path. A pod's root filesystem is read-only under the
restricted Pod Security Standard's usual settings, so in-memory PEM goes through an anonymous
memory file (Linux memfd, opened by its /proc/self/fd path), else a private temporary folder.
The serving certificate is the mounted pair if given (read again when the files change, as a
rotated Secret is), else a self-signed one made at start, as kube-scheduler makes one.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

SELF_SIGNED_DAYS = 365


def load_chain_data(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load a PEM certificate chain and key held in memory into `context`."""
    with _memory_files(cert, key) as (cert_path, key_path):
        context.load_cert_chain(cert_path, key_path)


@contextlib.contextmanager
def _memory_files(*contents: bytes) -> Iterator[list[str]]:
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and Path("/proc/self/fd").is_dir():
        fds = [memfd_create("batchsched-tls", os.MFD_CLOEXEC) for _ in contents]
        try:
            for fd, data in zip(fds, contents, strict=True):
                os.write(fd, data)
            yield [f"/proc/self/fd/{fd}" for fd in fds]
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="batchsched-tls-") as folder:
        paths = [Path(folder, f"{i}.pem") for i in range(len(contents))]
        for path, data in zip(paths, contents, strict=True):
            path.touch(mode=0o600)
            path.write_bytes(data)
        yield [str(path) for path in paths]


def self_signed(hostname: str | None = None) -> tuple[bytes, bytes]:
    """A new self-signed serving certificate and its key (PEM), valid for a year for the
    host's name, localhost, 127.0.0.1 and ::1; named `batchsched@<unix time>` as
    kube-scheduler names its own."""
    # Imported here: only a scheduler serving HTTPS without a mounted certificate needs it.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    host = hostname or socket.gethostname()
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"batchsched@{int(now.timestamp())}")]
    )
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    if host and host != "localhost":
        names.insert(0, x509.DNSName(host))
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", "::1")]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class ServingCertificate:
    """The server side's TLS context: from `cert_file`/`key_file` (checked for changes at
    each connection, at most every `recheck` seconds) or self-signed in memory."""

    def __init__(
        self, cert_file: Path | None = None, key_file: Path | None = None, recheck: float = 10.0
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.recheck = recheck
        self._lock = threading.Lock()
        self._stamp: tuple[float, ...] = ()
        self._checked = 0.0
        # A mounted pair is loaded now (a bad one is an error at start); a self-signed one is
        # made by prepare(), in the server's thread, while the informers list.
        self._context = self._load() if cert_file is not None else None

    def prepare(self) -> None:
        """Make the self-signed certificate if there is none yet."""
        with self._lock:
            if self._context is None:
                context = _server_context()
                load_chain_data(context, *self_signed())
                self._context = context

    def _files_stamp(self) -> tuple[float, ...]:
        assert self.cert_file is not None and self.key_file is not None
        stats = [os.stat(path) for path in (self.cert_file, self.key_file)]
        return tuple(v for s in stats for v in (s.st_mtime, s.st_size, s.st_ino))

    def _load(self) -> ssl.SSLContext:
        """The files' pair, read now; ssl.SSLError or OSError if they cannot be."""
        assert self.cert_file is not None and self.key_file is not None
        stamp = self._files_stamp()
        context = _server_context()
        context.load_cert_chain(self.cert_file, self.key_file)
        self._stamp = stamp
        return context

    def context(self, now: float) -> ssl.SSLContext:
        """The context for a new connection; a changed pair is loaded (a broken one is
        reported and the last good one kept)."""
        self.prepare()
        with self._lock:
            assert self._context is not None
            if self.cert_file is None or now - self._checked < self.recheck:
                return self._context
            self._checked = now
            try:
                if self._files_stamp() != self._stamp:
                    self._context = self._load()
                    log.info("serving certificate %s loaded again (changed)", self.cert_file)
            except (OSError, ssl.SSLError) as err:
                log.warning(
                    "serving certificate %s: cannot load the changed files (%s); keeping the "
                    "previous one",
                    self.cert_file,
                    err,
                )
            return self._context
