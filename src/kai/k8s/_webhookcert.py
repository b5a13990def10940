"""The admission webhook's serving certificate: a self-signed CA and a certificate it signs, kept in a
Secret, rotated, and trusted by the webhook configurations' ``caBundle``.

Theory of operation:

* The Secret (``kai-admission-webhook-tls-secret`` in ``kai-scheduler``, KAI's name) is of type
  ``kubernetes.io/tls`` with cert-manager's keys: ``tls.crt``, ``tls.key``, ``ca.crt``; kai adds ``ca.key``
  (to sign the next certificate) and, during a CA rotation, ``ca-previous.crt``.
* ``ensure`` makes the Secret when it is missing, and renews what is due: the serving certificate (valid a
  year) when it has less than 30 days left or does not name a host it must serve; the CA (ten years) when it
  has less than a year left, keeping the old CA in the bundle until it expires, so a server still presenting
  a certificate of the old CA stays trusted while the new one rolls out.
* ``sync_ca_bundle`` writes the CA bundle into every webhook of kai's Mutating- and
  ValidatingWebhookConfiguration whose ``caBundle`` differs (strategic merge on the webhook's name).
* A Secret that carries cert-manager's annotation ``cert-manager.io/certificate-name`` belongs to
  cert-manager: kai never writes it nor the ``caBundle`` (cert-manager's CA injector does, from the
  configurations' ``cert-manager.io/inject-ca-from`` annotation); kai only serves what it holds and
  reloads it when cert-manager renews it.

Pure certificate work (``issue_ca``, ``issue_serving``, ``due``) is separate from the API calls.
"""

from __future__ import annotations

import base64
import datetime as _dt
import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kai.k8s._api import Api, ApiError

log = logging.getLogger("kai.k8s.webhookcert")

SECRET_NAME = "kai-admission-webhook-tls-secret"
NAMESPACE = "kai-scheduler"
SERVICE = "admission"  # KAI's Service name for its admission webhooks
MUTATING_CONFIGURATION = "mutating-kai-admission"
VALIDATING_CONFIGURATION = "validating-kai-admission"
CERT_MANAGER_ANNOTATION = "cert-manager.io/certificate-name"
PART_OF_KAI = {"app.kubernetes.io/part-of": "kai"}
CA_DAYS = 3650
CERT_DAYS = 365
RENEW_CERT_BEFORE = _dt.timedelta(days=30)
RENEW_CA_BEFORE = _dt.timedelta(days=365)


def service_hosts(service: str = SERVICE, namespace: str = NAMESPACE) -> tuple[str, ...]:
    """The names the API server dials a webhook Service by, and loopback for out-of-cluster runs."""
    return (f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", "localhost", "127.0.0.1")


@dataclass(frozen=True)
class CertBundle:
    """PEM bytes of one Secret's contents."""

    cert: bytes
    key: bytes
    ca: bytes
    ca_key: bytes = b""
    ca_previous: bytes = b""
    external: bool = False  # cert-manager's: never written by kai

    @property
    def ca_bundle(self) -> bytes:
        """What the API server must trust: the CA, and the previous CA while a rotation is under way."""
        return self.ca + self.ca_previous

    def data(self) -> dict[str, str]:
        out = {"tls.crt": self.cert, "tls.key": self.key, "ca.crt": self.ca, "ca.key": self.ca_key}
        if self.ca_previous:
            out["ca-previous.crt"] = self.ca_previous
        return {k: base64.b64encode(v).decode() for k, v in out.items()}


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    pkcs8, plain = serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, pkcs8, plain)


def issue_ca(days: int = CA_DAYS, now: _dt.datetime | None = None) -> tuple[bytes, bytes]:
    """A new self-signed CA: (cert PEM, key PEM)."""
    now = now or _now()
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"kai-admission-ca-{now:%Y%m%d%H%M%S}")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )  # digitalSignature, keyCertSign, cRLSign
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_serving(
    ca_pem: bytes, ca_key_pem: bytes, hosts: Iterable[str], days: int = CERT_DAYS, now: _dt.datetime | None = None
) -> tuple[bytes, bytes]:
    """A serving certificate for *hosts* (DNS names and IP addresses), signed by the CA: (cert, key) PEM."""
    now = now or _now()
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for h in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    first = next(iter(dict.fromkeys(hosts)), "kai-admission")
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, first)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(min(now + _dt.timedelta(days=days), ca.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def cert_hosts(cert_pem: bytes) -> set[str]:
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(v) for v in san.get_values_for_type(x509.DNSName)} | {
        str(v) for v in san.get_values_for_type(x509.IPAddress)
    }


def expires(pem: bytes) -> _dt.datetime:
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc


def due(bundle: CertBundle, hosts: Iterable[str], now: _dt.datetime | None = None) -> str:
    """What must be renewed now: "ca", "cert" or "" (nothing). "ca" implies a new certificate too."""
    now = now or _now()
    if not bundle.ca_key:
        return "ca"  # not kai's (made by another tool, or KAI's operator): take it over
    if expires(bundle.ca) - now < RENEW_CA_BEFORE:
        return "ca"
    if expires(bundle.cert) - now < RENEW_CERT_BEFORE or not set(hosts) <= cert_hosts(bundle.cert):
        return "cert"
    try:
        x509.load_pem_x509_certificate(bundle.cert).verify_directly_issued_by(x509.load_pem_x509_certificate(bundle.ca))
    except (ValueError, TypeError, x509.InvalidSignature):
        return "cert"
    return ""


def renew(bundle: CertBundle | None, hosts: Iterable[str], now: _dt.datetime | None = None) -> CertBundle:
    """The bundle after renewing what is due (a new one when *bundle* is None)."""
    hosts = tuple(hosts)
    now = now or _now()
    what = "ca" if bundle is None else due(bundle, hosts, now)
    if bundle is not None and not what:
        return bundle
    if what == "ca":
        ca, ca_key = issue_ca(now=now)
        previous = b""
        if bundle is not None and bundle.ca_key and expires(bundle.ca) > now:
            previous = bundle.ca  # still trusted while servers move to the new CA's certificate
    else:
        assert bundle is not None
        ca, ca_key = bundle.ca, bundle.ca_key
        previous = bundle.ca_previous if bundle.ca_previous and expires(bundle.ca_previous) > now else b""
    cert, key = issue_serving(ca, ca_key, hosts, now=now)
    return CertBundle(cert, key, ca, ca_key, previous)


def _bundle_of(secret: dict) -> CertBundle | None:
    data = secret.get("data") or {}
    try:
        got = {k: base64.b64decode(v) for k, v in data.items()}
    except (ValueError, TypeError):
        return None
    if not got.get("tls.crt") or not got.get("tls.key"):
        return None
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    return CertBundle(
        cert=got["tls.crt"],
        key=got["tls.key"],
        ca=got.get("ca.crt") or got["tls.crt"],  # a self-signed certificate is its own CA
        ca_key=got.get("ca.key", b""),
        ca_previous=got.get("ca-previous.crt", b""),
        external=CERT_MANAGER_ANNOTATION in annotations,
    )


class CertStore:
    """The Secret on the API server: read, create, renew; and the configurations' caBundle."""

    def __init__(self, api: Api, *, namespace: str = NAMESPACE, name: str = SECRET_NAME) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name

    @property
    def _path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/secrets/{self.name}"

    async def read(self) -> tuple[CertBundle | None, str]:
        """(the Secret's bundle or None, its resourceVersion or "" when there is no Secret)."""
        try:
            secret = await self.api.request("GET", self._path)
        except ApiError as e:
            if e.code == 404:
                return None, ""
            raise
        return _bundle_of(secret), str((secret.get("metadata") or {}).get("resourceVersion", ""))

    async def ensure(self, hosts: Iterable[str], *, may_write: bool = True) -> CertBundle:
        """The bundle to serve: the Secret's, after making or renewing it when that is due and *may_write*
        (a standby replica only reads; cert-manager's Secret is only read)."""
        hosts = tuple(hosts)
        for _ in range(5):  # another replica may write between our read and our write: read again
            bundle, rv = await self.read()
            if bundle is not None and (bundle.external or not may_write or not due(bundle, hosts)):
                return bundle
            if not may_write:
                raise ApiError(404, f"Secret {self.namespace}/{self.name} has no serving certificate yet")
            fresh = renew(bundle, hosts)
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": PART_OF_KAI},
                "data": fresh.data(),
            }
            try:
                if not rv:
                    await self.api.request("POST", f"/api/v1/namespaces/{self.namespace}/secrets", body=body)
                else:
                    body["metadata"]["resourceVersion"] = rv
                    await self.api.request("PUT", self._path, body=body)
            except ApiError as e:
                if e.code == 409:
                    continue
                raise
            log.info("webhook certificate written", extra={"secret": f"{self.namespace}/{self.name}"})
            return fresh
        raise ApiError(409, f"Secret {self.namespace}/{self.name} kept changing while kai renewed it")

    async def sync_ca_bundle(self, bundle: CertBundle) -> int:
        """Write the bundle's CA into each webhook of kai's two configurations that lacks it; how many
        configurations were patched. A configuration that is not installed is skipped."""
        if bundle.external:
            return 0
        want = base64.b64encode(bundle.ca_bundle).decode()
        patched = 0
        for kind, name in (
            ("mutatingwebhookconfigurations", MUTATING_CONFIGURATION),
            ("validatingwebhookconfigurations", VALIDATING_CONFIGURATION),
        ):
            path = f"/apis/admissionregistration.k8s.io/v1/{kind}/{name}"
            try:
                conf = await self.api.request("GET", path)
            except ApiError as e:
                if e.code == 404:
                    continue
                raise
            hooks = conf.get("webhooks") or []
            stale = [w["name"] for w in hooks if (w.get("clientConfig") or {}).get("caBundle") != want]
            if not stale:
                continue
            body = {"webhooks": [{"name": n, "clientConfig": {"caBundle": want}} for n in stale]}
            await self.api.request("PATCH", path, body=body, content_type="application/strategic-merge-patch+json")
            patched += 1
        return patched
