"""kai's kubeconfig reader (``kai.k8s._kubeconfig``) means what lightkube's loader meant: the same context,
cluster and user for every kind of entry, the same search order, clear errors; and a client certificate
given inline is loaded without a file (checked by a TLS server that requires it)."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ssl
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from lightkube import KubeConfig

from kai.k8s._fasthttp import FastHttp
from kai.k8s._kubeconfig import ConfigError, in_cluster, load_config
from kai.k8s._tls import ResumingContext, tls_context
from kai.k8s._webhookcert import issue_ca, issue_serving

B64 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
DOC = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "token",
    "clusters": [
        {"name": "data", "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority-data": B64}},
        {"name": "file", "cluster": {"server": "https://k8s.example:443", "certificate-authority": "ca/ca.crt"}},
        {"name": "insecure", "cluster": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}},
        {"name": "bare", "cluster": {}},
    ],
    "users": [
        {"name": "token", "user": {"token": "t0k"}},
        {"name": "token-file", "user": {"tokenFile": "/var/run/token"}},
        {"name": "cert-files", "user": {"client-certificate": "me.crt", "client-key": "/abs/me.key"}},
        {"name": "cert-data", "user": {"client-certificate-data": B64, "client-key-data": B64}},
        {"name": "basic", "user": {"username": "u", "password": "p"}},
        {
            "name": "exec",
            "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws", "args": ["x"]}},
        },
        {"name": "provider", "user": {"auth-provider": {"name": "oidc", "config": {"id-token": "x"}}}},
    ],
    "contexts": [
        {"name": "token", "context": {"cluster": "data", "user": "token", "namespace": "team-a"}},
        {"name": "token-file", "context": {"cluster": "file", "user": "token-file"}},
        {"name": "cert-files", "context": {"cluster": "file", "user": "cert-files"}},
        {"name": "cert-data", "context": {"cluster": "data", "user": "cert-data"}},
        {"name": "basic", "context": {"cluster": "insecure", "user": "basic"}},
        {"name": "exec", "context": {"cluster": "data", "user": "exec"}},
        {"name": "provider", "context": {"cluster": "data", "user": "provider"}},
        {"name": "no-user", "context": {"cluster": "bare"}},
    ],
}


def _write(tmp_path: Path, doc: object, name: str = "kubeconfig") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("context", [c["name"] for c in DOC["contexts"]])  # type: ignore[index]
def test_every_kind_of_entry_reads_as_lightkube_reads_it(tmp_path: Path, context: str) -> None:
    path = _write(tmp_path, DOC)
    ours = load_config(str(path), context)
    theirs = KubeConfig.from_file(path).get(context)
    assert ours.lightkube() == theirs
    assert (ours.context_name, ours.namespace, ours.cluster.server) == (
        theirs.context_name,
        theirs.namespace,
        theirs.cluster.server,
    )
    for name in ("ca/ca.crt", "/abs/me.key"):
        assert Path(ours.abs_file(name)) == Path(theirs.abs_file(name))


def test_the_current_context_is_the_default_and_kubeconfig_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, DOC)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(path))
    config = load_config(None)
    assert (config.context_name, config.user and config.user.token, config.namespace) == ("token", "t0k", "team-a")
    assert config.ca_pem() == base64.b64decode(B64).decode()
    assert load_config(str(path)).context_name == "token"


def test_in_cluster_the_service_account_is_read_as_lightkube_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token\n")
    (account / "namespace").write_text("kai-scheduler")
    (account / "ca.crt").write_text("x")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    ours = in_cluster(str(account))
    assert ours is not None
    assert ours.lightkube() == KubeConfig.from_service_account(account).get()
    assert (
        ours.cluster.server == "https://[fd00::1]:443" and ours.user and ours.user.token_file == str(account / "token")
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert in_cluster(str(account)) is None  # not in a cluster: the kubeconfig file is read instead


@pytest.mark.parametrize(
    ("doc", "context", "says"),
    [
        (DOC, "nope", "context 'nope' not found"),
        ({**DOC, "current-context": None}, None, "no current context"),
        ({**DOC, "contexts": [{"name": "x", "context": {"cluster": "gone"}}]}, "x", "cluster 'gone'"),
        ({**DOC, "contexts": [{"name": "x", "context": {"cluster": "data", "user": "gone"}}]}, "x", "user 'gone'"),
        ({**DOC, "clusters": [{"name": "data", "cluster": {"server": 6443}}]}, None, "clusters['data'].cluster"),
        ({**DOC, "clusters": "data"}, None, "clusters must be a list"),
        ("just a string", None, "not a kubeconfig"),
        ({"apiVersion": "v1", "contexts": []}, None, "missing 'clusters'"),
    ],
)
def test_a_bad_kubeconfig_is_a_config_error_naming_what(tmp_path: Path, doc: object, context: str, says: str) -> None:
    path = _write(tmp_path, doc)
    with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]")) as e:
        load_config(str(path), context)
    assert isinstance(e.value, ValueError)  # what `kai scheduler` reports as a bad kubeconfig


def test_a_missing_file_and_a_bad_exec_entry_are_errors_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(str(tmp_path / "absent"))
    bad = {**DOC, "users": [{"name": "token", "user": {"exec": {"command": "aws"}}}]}  # no apiVersion
    with pytest.raises(ConfigError, match="apiVersion"):
        load_config(str(_write(tmp_path, bad)))


def _client_cert(ca: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    """A client certificate (clientAuth) signed by *ca*: (cert PEM, key PEM)."""
    ca_cert = x509.load_pem_x509_certificate(ca[0])
    ca_key = serialization.load_pem_private_key(ca[1], None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kai-scheduler")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), pem


def test_an_inline_client_certificate_is_presented_to_a_server_that_requires_one(tmp_path: Path) -> None:
    ca = issue_ca()
    cert, key = _client_cert(ca)
    serving, serving_key = issue_serving(*ca, ["127.0.0.1"])
    (tmp_path / "s.crt").write_bytes(serving)
    (tmp_path / "s.key").write_bytes(serving_key)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "s.crt", tmp_path / "s.key")
    server_ctx.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no handshake
    server_ctx.load_verify_locations(cadata=ca[0].decode())
    peers: list[str] = []

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        subject = dict(x[0] for x in w.get_extra_info("peercert")["subject"])
        peers.append(subject["commonName"])
        await r.readuntil(b"\r\n\r\n")
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await w.drain()
        w.close()

    async def run() -> int:
        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        doc = {
            "current-context": "c",
            "clusters": [
                {
                    "name": "s",
                    "cluster": {"server": f"https://127.0.0.1:{port}", "certificate-authority-data": b64(ca[0])},
                }
            ],
            "users": [{"name": "u", "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}],
            "contexts": [{"name": "c", "context": {"cluster": "s", "user": "u"}}],
        }
        config = load_config(str(_write(tmp_path, doc)))
        assert isinstance(tls_context(config), ResumingContext)
        http = FastHttp.for_config(config)
        assert http is not None
        try:
            status, _ = await http.request("GET", "/version", None, "")
            return status
        finally:
            await http.close()
            server.close()

    assert asyncio.run(run()) == 200
    assert peers == ["kai-scheduler"]
