"""The kubeconfig as kai's clients read it: which server, whose CA, which certificate or token.

Why kai reads it itself: lightkube's loader is a module of the lightkube package, and importing any of it
imports lightkube's clients and httpx2 with them: 60-80 ms of CPU at ``kai scheduler``'s start, before
its first list can go out, for a client the scheduler does not use (its requests go through
``kai.k8s._fasthttp``). The rules are lightkube's, so a kubeconfig means to kai what it meant before:

- ``load_config(None)``: the in-cluster ServiceAccount (``KUBERNETES_SERVICE_HOST``/``_PORT`` and the
  account's token, CA and namespace files) if there is one, else the file ``$KUBECONFIG`` names (one
  path), else ``~/.kube/config``; ``load_config(path)``: that file.
- A file's ``current-context`` is used, or the *context* asked for; its cluster and user are looked up
  by name. Relative file names are relative to the kubeconfig's directory.
- Fields are read with lightkube's names and types (``certificate-authority[-data]``,
  ``insecure-skip-tls-verify``, ``client-certificate[-data]``, ``client-key[-data]``, ``token``,
  ``tokenFile``, ``username``/``password``, ``exec``, ``auth-provider``); others are ignored, as
  lightkube ignores them.

What kai's own client does not handle (exec plugins, auth providers, basic auth, a cluster without a
named CA) goes through lightkube and httpx: ``Config.lightkube()`` gives lightkube's SingleConfig for the
same cluster, user and context, imported only then. A bad kubeconfig is a ``ConfigError`` saying which
file and field.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from lightkube.config.kubeconfig import SingleConfig

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_KUBECONFIG = "~/.kube/config"
DEFAULT_NAMESPACE = "default"


class ConfigError(ValueError):
    """The kubeconfig cannot be used: no such file or context, or a field of the wrong type."""


class Cluster(msgspec.Struct, frozen=True, omit_defaults=True):
    server: str = "http://localhost:8080"  # lightkube's default
    certificate_auth: str | None = msgspec.field(name="certificate-authority", default=None)
    certificate_auth_data: str | None = msgspec.field(name="certificate-authority-data", default=None)
    insecure: bool = msgspec.field(name="insecure-skip-tls-verify", default=False)


class User(msgspec.Struct, frozen=True, omit_defaults=True):
    exec: dict[str, Any] | None = None  # checked by lightkube's model when it is used (``Config.lightkube``)
    username: str | None = None
    password: str | None = None
    token: str | None = None
    token_file: str | None = msgspec.field(name="tokenFile", default=None)
    auth_provider: dict[str, Any] | None = msgspec.field(name="auth-provider", default=None)
    client_cert: str | None = msgspec.field(name="client-certificate", default=None)
    client_cert_data: str | None = msgspec.field(name="client-certificate-data", default=None)
    client_key: str | None = msgspec.field(name="client-key", default=None)
    client_key_data: str | None = msgspec.field(name="client-key-data", default=None)

    @property
    def other_auth(self) -> bool:
        """Credentials kai's own client does not send: an exec plugin, an auth provider, basic auth."""
        return bool(self.exec or self.auth_provider or (self.username and self.password))


class Context(msgspec.Struct, frozen=True, omit_defaults=True):
    cluster: str
    user: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Config:
    """One context of a kubeconfig: its cluster and user (what lightkube calls a SingleConfig)."""

    context_name: str
    context: Context
    cluster: Cluster
    user: User | None
    fname: Path | None  # the file it came from (relative paths are relative to its directory)

    @property
    def namespace(self) -> str:
        return self.context.namespace or DEFAULT_NAMESPACE

    def abs_file(self, name: str) -> str:
        """*name*, relative to the kubeconfig's directory when it is not absolute."""
        if Path(name).is_absolute():
            return name
        if self.fname is None:
            raise ConfigError(f"{name} is relative, but the kubeconfig's path is not known")
        return str(self.fname.parent / name)

    def ca_pem(self) -> str | None:
        """The cluster's CA certificates as PEM text: inline data, or None (a file, or none named)."""
        data = self.cluster.certificate_auth_data
        if not data:
            return None
        try:
            return _b64(data, "certificate-authority-data").decode("ascii")
        except UnicodeDecodeError as e:
            raise ConfigError(f"certificate-authority-data: not PEM: {e}") from e

    def client_pem(self) -> tuple[bytes | str, bytes | str] | None:
        """The client certificate and key: each PEM bytes (inline data) or a file's path; None without one."""
        user = self.user
        if user is None or not (user.client_cert or user.client_cert_data):
            return None
        cert: bytes | str | None = (
            _b64(user.client_cert_data, "client-certificate-data") if user.client_cert_data else None
        ) or (self.abs_file(user.client_cert) if user.client_cert else None)
        key: bytes | str | None = (_b64(user.client_key_data, "client-key-data") if user.client_key_data else None) or (
            self.abs_file(user.client_key) if user.client_key else None
        )
        if cert is None or key is None:
            raise ConfigError(f"user of context {self.context_name!r}: a client certificate needs its key")
        return cert, key

    def lightkube(self) -> SingleConfig:
        """The same context as lightkube's SingleConfig, for lightkube's clients and httpx (imported here)."""
        from lightkube.config import kubeconfig as lk

        def raw(obj: msgspec.Struct | None) -> Any:
            return msgspec.to_builtins(obj) if obj is not None else None

        try:
            return lk.SingleConfig(
                context_name=self.context_name,
                context=msgspec.convert(raw(self.context), lk.Context),
                cluster=msgspec.convert(raw(self.cluster), lk.Cluster),
                user=msgspec.convert(raw(self.user), lk.User) if self.user is not None else None,
                fname=self.fname,
            )
        except msgspec.ValidationError as e:
            raise ConfigError(f"{self.fname or 'kubeconfig'}: {e}") from e


def load_config(kubeconfig: str | None, context: str | None = None) -> Config:
    """The connection settings of *kubeconfig*, or else (None) in-cluster config, $KUBECONFIG or
    ~/.kube/config (see the module's rules). Credentials kai's client does not send are checked now,
    through lightkube, so a bad exec entry is an error at the start, not at the first request."""
    if kubeconfig:
        config = from_file(kubeconfig, context)
    else:
        config = in_cluster() or from_file(os.environ.get("KUBECONFIG", DEFAULT_KUBECONFIG), context)
    if config.user is not None and config.user.other_auth:
        config.lightkube()
    return config


def in_cluster(service_account: str = SERVICE_ACCOUNT) -> Config | None:
    """The pod's ServiceAccount, as lightkube's ``from_service_account``; None outside a cluster."""
    account = Path(service_account)
    try:
        token = (account / "token").read_text()
        namespace = (account / "namespace").read_text()
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
    except (OSError, KeyError):
        return None
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return Config(
        context_name="default",
        context=Context(cluster="default", user="default", namespace=namespace),
        cluster=Cluster(server=f"https://{host}:{port}", certificate_auth=str(account / "ca.crt")),
        user=User(token=token, token_file=str(account / "token")),
        fname=None,
    )


def from_file(fname: str, context: str | None = None) -> Config:
    """Context *context* (default: the current one) of the kubeconfig file *fname*."""
    import yaml  # here: a scheduler in its pod reads its ServiceAccount, no YAML

    path = Path(fname).expanduser()
    try:
        doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as e:
        raise ConfigError(f"Configuration file {fname} not found") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{fname}: not YAML: {e}") from e
    if not isinstance(doc, dict):
        raise ConfigError(f"{fname}: not a kubeconfig (a mapping)")
    for section in ("clusters", "contexts"):  # both required, as lightkube requires them
        if section not in doc:
            raise ConfigError(f"{fname}: missing {section!r}")
    name = context or doc.get("current-context")
    if not name:
        raise ConfigError(f"{fname}: no current context set and no default provided")
    ctx = _named(doc, "contexts", "context", name, Context, fname)
    if ctx is None:
        raise ConfigError(f"{fname}: context {name!r} not found")
    cluster = _named(doc, "clusters", "cluster", ctx.cluster, Cluster, fname)
    if cluster is None:
        raise ConfigError(f"{fname}: cluster {ctx.cluster!r} of context {name!r} not found")
    user = _named(doc, "users", "user", ctx.user, User, fname) if ctx.user else None
    if ctx.user and user is None:
        raise ConfigError(f"{fname}: user {ctx.user!r} of context {name!r} not found")
    return Config(context_name=name, context=ctx, cluster=cluster, user=user, fname=path)


def _named(doc: dict[str, Any], section: str, key: str, name: str, model: type[Any], fname: str) -> Any:
    """The entry called *name* in the list *section* (each ``{name: ..., <key>: {...}}``), read as *model*."""
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise ConfigError(f"{fname}: {section} must be a list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            try:
                return msgspec.convert(entry.get(key) or {}, model)
            except msgspec.ValidationError as e:
                raise ConfigError(f"{fname}: {section}[{name!r}].{key}: {e}") from e
    return None


def _b64(data: str, field: str) -> bytes:
    try:
        return base64.b64decode(data)  # as lightkube: characters outside the alphabet are skipped
    except ValueError as e:
        raise ConfigError(f"{field}: not base64: {e}") from e
