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

import ssl
import sys
from typing import Any

from lightkube.config.client_adapter import user_cert, verify_cluster
from lightkube.config.kubeconfig import SingleConfig
from lightkube.config.models import FileStr


class ResumingContext(ssl.SSLContext):
    """A client SSLContext that offers ``session`` on each new connection it wraps.

    asyncio (and uvloop) wrap every connection with ``SSLContext.wrap_bio`` and have no way to pass a
    session, so the context carries the one to offer; its owner (``FastHttp``) sets it before each
    connect, from ``source``, the latest full handshake, once it has received a ticket. Both live on the
    context, so every pool that shares it (the Lease's, ``FastHttp.sibling``) resumes the same session."""

    session: ssl.SSLSession | None = None
    source: ssl.SSLObject | None = None  # the latest full handshake made with this context (its ticket is offered)

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


def tls_context(config: SingleConfig) -> ssl.SSLContext:
    """The client context for *config*'s cluster: resuming sessions when the kubeconfig names the CA,
    else lightkube's (see the module docstring)."""
    cluster, user = config.cluster, config.user
    cafile: Any = None
    if cluster.certificate_auth:
        cafile = config.abs_file(cluster.certificate_auth)
    elif cluster.certificate_auth_data:
        cafile = FileStr(cluster.certificate_auth_data)
    if cafile is None:
        return verify_cluster(cluster, user, config.abs_file)
    # what ssl.create_default_context(cafile=...) makes (lightkube's choice), as a ResumingContext
    ctx = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname checked, peer certificate required
    if sys.version_info >= (3, 13):
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
    ctx.load_verify_locations(cafile=cafile)
    if user is not None and (cert := user_cert(user, config.abs_file)):
        ctx.load_cert_chain(*cert)
    return ctx


def resumable(sslobj: ssl.SSLObject | None) -> ssl.SSLSession | None:
    """*sslobj*'s session if it holds a ticket to resume with (TLS 1.3 sends tickets after the
    handshake, so a connection that has not read an answer yet may have none)."""
    if sslobj is None:
        return None
    session = sslobj.session
    return session if session is not None and session.has_ticket else None
