"""The TLS context of kai's own HTTP client: the kubeconfig's trust and client certificate, and TLS
session resumption across its connections.

Why resumption: kai opens many connections to one API server at once, a watch per kind and up to
``bind_concurrency`` for binds. A full TLS 1.3 handshake costs the API server an RSA signature
(its certificate) and kai one more (its client certificate, where it has one): about 2 ms of CPU on
each side, for every connection. On a 2-core control plane, the ~80 connections of a scheduler's first
second took 0.2 s of the API server's CPU, just when the first binds go out. A resumed handshake
(RFC 8446 §2.2, a pre-shared key from the server's session ticket) signs nothing: measured against
kube-apiserver, 64 connections took 0.05 s of kai's CPU instead of 0.07 s, and 0.05 s instead of 0.11 s
of wall time.

Rules:

- Each new connection offers the ticket of the latest full handshake, once that connection has
  received it (before, it offers none). The server decides: a ticket it cannot use (it restarted with
  new keys, or the ticket expired) costs a full handshake, whose own ticket is offered from then on.
  Nothing else changes: the peer is verified against the same CA on every handshake, full or resumed,
  and the client certificate's identity is carried in the ticket by the server.
- Early data (0-RTT) is never sent: replaying it is the one risk resumption has, and Python does not
  offer it.
- Resumption is used where kai builds the context: a kubeconfig that names its CA (a file or inline
  data), as every cluster's and in-cluster config does. Without one (the system's CAs, or
  insecure-skip-tls-verify), lightkube's context is used as it is, without resumption.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import sys
import tempfile
from collections.abc import Iterator

from kai.k8s._kubeconfig import Config


class ResumingContext(ssl.SSLContext):
    """A client SSLContext that offers ``session`` on each new connection it wraps.

    asyncio (and uvloop) wrap every connection with ``SSLContext.wrap_bio`` and have no way to pass a
    session, so the context carries the one to offer; its owner (``FastHttp``) sets it before each
    connect, from ``source``, the latest full handshake, once it has received a ticket. Both live on the
    context, so every pool that shares it (the Lease's, ``FastHttp.sibling``) resumes the same session."""

    session: ssl.SSLSession | None = None
    source: ssl.SSLObject | None = None  # the latest full handshake made with this context (its ticket is offered)
    _offered: ssl.SSLSession | None = None
    _offered_from: ssl.SSLObject | None = None

    def offer(self) -> ssl.SSLSession | None:
        """The session to offer next: ``source``'s, once it holds a ticket. Read once per source and kept:
        each read of ``SSLObject.session`` copies the session through DER, the server's certificate chain
        with it (~0.5-0.8 ms), and a burst of binds opens 64 connections at once (the same ticket was
        offered by each before, through 64 copies)."""
        if self._offered is None or self._offered_from is not self.source:
            self._offered = resumable(self.source)
            self._offered_from = self.source if self._offered is not None else None
        return self._offered

    def wrap_bio(  # type: ignore[override]
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        if session is None and not server_side:
            session = self.session
        return super().wrap_bio(
            incoming, outgoing, server_side=server_side, server_hostname=server_hostname, session=session
        )


def tls_context(config: Config) -> ssl.SSLContext:
    """The client context for *config*'s cluster: resuming sessions when the kubeconfig names the CA,
    else lightkube's (see the module docstring)."""
    cluster = config.cluster
    if not (cluster.certificate_auth or cluster.certificate_auth_data):  # the system's CAs, or no check
        from lightkube.config.client_adapter import verify_cluster

        lk = config.lightkube()
        return verify_cluster(lk.cluster, lk.user, lk.abs_file)  # type: ignore[arg-type]
    # what ssl.create_default_context(cafile=...) makes (lightkube's choice), as a ResumingContext
    ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname checked, peer certificate required
    if sys.version_info >= (3, 13):
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
    if cluster.certificate_auth:
        ctx.load_verify_locations(cafile=config.abs_file(cluster.certificate_auth))
    else:
        ctx.load_verify_locations(cadata=config.ca_pem())
    if (client := config.client_pem()) is not None:
        with contextlib.ExitStack() as files:
            cert, key = (p if isinstance(p, str) else files.enter_context(_memory_file(p)) for p in client)
            ctx.load_cert_chain(cert, key)
    return ctx


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path to *data* while the block runs. ``ssl`` loads a certificate and its key from files only; an
    inline one (``client-key-data``) is handed over as an anonymous in-memory file, so the key is never
    written to a disk (lightkube kept it in a temporary file for the process's life)."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("kai-kubeconfig")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        yield f.name


def resumable(sslobj: ssl.SSLObject | None) -> ssl.SSLSession | None:
    """*sslobj*'s session if it holds a ticket to resume with (TLS 1.3 sends tickets after the
    handshake, so a connection that has not read an answer yet may have none)."""
    if sslobj is None:
        return None
    session = sslobj.session
    return session if session is not None and session.has_ticket else None
