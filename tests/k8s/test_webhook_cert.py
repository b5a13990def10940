"""The admission webhooks' certificate on a real API server: made by ``kai install --webhook-url`` and kept
in the Secret kai-admission-webhook-tls-secret, trusted through the configurations' caBundle, renewed and
its CA rotated while the API server keeps calling, and a cert-manager-managed Secret only read. There is
no cert-manager here: the test plays it (and its CA injector) by writing the Secret and the caBundle."""

from __future__ import annotations

import base64
import datetime as dt
import socket
import ssl
from typing import Any

from lightkube import Client
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration, ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Pod, Secret
from lightkube.types import PatchType

from kai.k8s._webhookcert import CertBundle, issue_ca, issue_serving, renew, service_hosts
from kai.k8s.envtest import ControlPlane
from tests.k8s.sched import InProcess, options, wait_for

SECRET = "kai-admission-webhook-tls-secret"


def _secret(client: Client) -> Secret:
    return client.get(Secret, SECRET, namespace="kai-scheduler")


def _ca_bundles(client: Client) -> set[str]:
    out = set()
    for kind, name in (
        (MutatingWebhookConfiguration, "mutating-kai-admission"),
        (ValidatingWebhookConfiguration, "validating-kai-admission"),
    ):
        conf = client.get(kind, name)
        out |= {w.clientConfig.caBundle for w in conf.webhooks}
    return out


def _fraction_pod(name: str, ns: str) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": ns, "annotations": {"gpu-fraction": "0.5"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]},
        }
    )


def _served_cert(port: int) -> bytes:
    """The certificate the webhook server presents (DER)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as tls:
        return tls.getpeercert(binary_form=True) or b""


def _der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


class Kai(InProcess):
    def __init__(self, cp: ControlPlane, port: int) -> None:
        # no RuntimeClass "nvidia" on this cluster: fraction pods get none
        # the webhook process checks its certificate every half second here (every minute by default)
        opts = options(cp, webhook_listen=("127.0.0.1", port), gpu_fraction_runtime_class="", webhook_refresh_s=0.5)
        super().__init__(opts)

    def __enter__(self) -> Kai:
        super().__enter__()
        wait_for(lambda: self.call(self.scheduler.webhook_serving), "the admission webhooks to serve")
        return self


def _put_secret(client: Client, bundle: CertBundle, annotations: dict[str, str] | None = None) -> None:
    data = bundle.data() if bundle.ca_key else {k: v for k, v in bundle.data().items() if k != "ca.key"}
    body: dict[str, Any] = {
        "metadata": {"name": SECRET, "namespace": "kai-scheduler", "annotations": annotations or {}}
    }
    body["data"] = data
    body["type"] = "kubernetes.io/tls"
    client.delete(Secret, SECRET, namespace="kai-scheduler")
    client.create(Secret.from_dict(body))


def test_the_certificate_is_made_trusted_renewed_and_its_ca_rotated(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, webhook_port: int
) -> None:
    secret = _secret(admin)  # made by kai install --webhook-url
    ca = base64.b64decode(secret.data["ca.crt"])
    assert secret.type == "kubernetes.io/tls" and set(secret.data) >= {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    assert _ca_bundles(admin) == {secret.data["ca.crt"]}
    with Kai(scheduler_cluster, webhook_port):
        assert _served_cert(webhook_port) == _der(base64.b64decode(secret.data["tls.crt"]))
        assert admin.create(_fraction_pod("first", ns)).metadata.annotations["runai/shared-gpu-configmap"]

        # A year on: the serving certificate has 10 days left and the CA half a year; kai renews both.
        hosts = (*service_hosts(), "127.0.0.1")
        old = renew(None, hosts, now=dt.datetime.now(dt.UTC) - dt.timedelta(days=3650 - 180))
        old = CertBundle(*issue_serving(old.ca, old.ca_key, hosts, days=10), old.ca, old.ca_key)
        _put_secret(admin, old)
        wait_for(lambda: "ca-previous.crt" in (_secret(admin).data or {}), "the CA to be rotated", 30)
        new = _secret(admin)
        new_ca = base64.b64decode(new.data["ca.crt"])
        assert new_ca not in (ca, old.ca)
        assert base64.b64decode(new.data["ca-previous.crt"]) == old.ca  # still trusted during the rotation
        # the Secret is written first, then each webhook configuration's caBundle: both CAs in every one
        both = {base64.b64encode(new_ca + old.ca).decode()}
        wait_for(lambda: _ca_bundles(admin) == both, "both CAs in every caBundle", 30)
        wait_for(lambda: _served_cert(webhook_port) == _der(base64.b64decode(new.data["tls.crt"])), "the new cert")
        # the API server trusts the new certificate: pods are still mutated
        assert admin.create(_fraction_pod("second", ns)).metadata.annotations["runai/shared-gpu-configmap"]


def test_a_secret_cert_manager_manages_is_only_read(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, webhook_port: int
) -> None:
    hosts = (*service_hosts(), "127.0.0.1")
    ca, ca_key = issue_ca()
    cert, key = issue_serving(ca, ca_key, hosts)
    annotations = {"cert-manager.io/certificate-name": "kai-admission"}
    _put_secret(admin, CertBundle(cert, key, ca), annotations)  # cert-manager's Secret: no ca.key
    bundle = base64.b64encode(ca).decode()
    for kind, name in (
        (MutatingWebhookConfiguration, "mutating-kai-admission"),
        (ValidatingWebhookConfiguration, "validating-kai-admission"),
    ):
        conf = admin.get(kind, name)  # cert-manager's CA injector writes the caBundle
        patch = {"webhooks": [{"name": w.name, "clientConfig": {"caBundle": bundle}} for w in conf.webhooks]}
        admin.patch(kind, name, patch, patch_type=PatchType.STRATEGIC)
    version = _secret(admin).metadata.resourceVersion
    with Kai(scheduler_cluster, webhook_port):
        assert _served_cert(webhook_port) == _der(cert)
        assert admin.create(_fraction_pod("via-cert-manager", ns)).metadata.annotations["runai/shared-gpu-configmap"]
        # cert-manager renews the certificate (same CA): kai serves the new one, writes nothing
        cert2, key2 = issue_serving(ca, ca_key, hosts)
        admin.patch(
            Secret,
            SECRET,
            {"data": {"tls.crt": base64.b64encode(cert2).decode(), "tls.key": base64.b64encode(key2).decode()}},
            namespace="kai-scheduler",
            patch_type=PatchType.MERGE,
        )
        version = _secret(admin).metadata.resourceVersion
        wait_for(lambda: _served_cert(webhook_port) == _der(cert2), "the renewed certificate to be served", 30)
    assert _secret(admin).metadata.resourceVersion == version
    assert "ca.key" not in _secret(admin).data
    assert _ca_bundles(admin) == {bundle}
    admin.delete(Secret, SECRET, namespace="kai-scheduler")  # the next test's kai install makes kai's own
