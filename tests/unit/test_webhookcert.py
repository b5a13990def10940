"""The webhook's certificates (kai.k8s._webhookcert): issue, what is due when, renewal and CA rotation."""

from __future__ import annotations

import datetime as dt
import ssl

from cryptography import x509

from kai.k8s._webhookcert import CertBundle, cert_hosts, due, expires, renew, service_hosts

HOSTS = (*service_hosts(), "10.1.2.3")
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_a_new_bundle_serves_every_host_and_chains_to_its_ca() -> None:
    b = renew(None, HOSTS, now=NOW)
    assert cert_hosts(b.cert) == set(HOSTS) | {"admission.kai-scheduler.svc"}
    assert cert_hosts(b.cert) >= {
        "admission.kai-scheduler.svc",
        "admission.kai-scheduler.svc.cluster.local",
        "127.0.0.1",
    }
    x509.load_pem_x509_certificate(b.cert).verify_directly_issued_by(x509.load_pem_x509_certificate(b.ca))
    assert b.ca_bundle == b.ca and not b.ca_previous
    assert due(b, HOSTS, now=NOW) == ""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # the pair loads as a TLS server's
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".pem") as f:
        f.write(b.cert + b.key)
        f.flush()
        ctx.load_cert_chain(f.name)


def test_the_certificate_is_renewed_before_it_expires_with_the_same_ca() -> None:
    b = renew(None, HOSTS, now=NOW)
    later = expires(b.cert) - dt.timedelta(days=29)
    assert due(b, HOSTS, now=later) == "cert"
    r = renew(b, HOSTS, now=later)
    assert r.ca == b.ca and r.ca_key == b.ca_key and r.cert != b.cert
    assert expires(r.cert) > expires(b.cert)
    assert due(r, HOSTS, now=later) == ""


def test_a_host_the_certificate_does_not_name_makes_a_new_one() -> None:
    b = renew(None, HOSTS, now=NOW)
    assert due(b, (*HOSTS, "kai.example.com"), now=NOW) == "cert"
    r = renew(b, (*HOSTS, "kai.example.com"), now=NOW)
    assert "kai.example.com" in cert_hosts(r.cert) and r.ca == b.ca


def test_the_ca_rotates_a_year_before_it_expires_and_the_old_ca_stays_trusted() -> None:
    b = renew(None, HOSTS, now=NOW)
    later = expires(b.ca) - dt.timedelta(days=300)
    assert due(b, HOSTS, now=later) == "ca"
    r = renew(b, HOSTS, now=later)
    assert r.ca != b.ca and r.ca_previous == b.ca
    assert r.ca_bundle == r.ca + b.ca  # servers still on the old CA's certificate stay trusted
    x509.load_pem_x509_certificate(r.cert).verify_directly_issued_by(x509.load_pem_x509_certificate(r.ca))
    gone = renew(r, HOSTS, now=expires(b.ca) + dt.timedelta(days=400))  # ... until the old CA expires
    assert not gone.ca_previous or expires(gone.ca_previous) > expires(b.ca)


def test_a_secret_without_kais_ca_key_is_taken_over() -> None:
    b = renew(None, HOSTS, now=NOW)
    foreign = CertBundle(b.cert, b.key, b.ca)  # e.g. KAI's operator's self-signed certificate
    assert due(foreign, HOSTS, now=NOW) == "ca"
    assert renew(foreign, HOSTS, now=NOW).ca_key
