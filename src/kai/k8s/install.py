"""``kai install``: server-side apply of kai's CRDs, its namespace, PriorityClasses and default Queues.

Rules:

* The objects come from the YAML files in deploy/ (shipped inside the package as
  ``kai/k8s/deploy``), the same files ``kubectl apply -k deploy/`` reads: one source of truth.
* Every object is sent as written, by server-side apply with field manager ``kai-install``
  and force, so a second run changes nothing (the API server keeps the resourceVersion) and
  fields that an earlier ``kubectl apply`` owned are taken over instead of conflicting.
* Order: CRDs, then wait until each is Established and listed in discovery (the API server
  serves a new kind only after the first, and kubectl finds it only after the second; on
  1.20 discovery lags Established by up to a second), then PriorityClasses, then Queues, then
  the FlowSchema that puts kai's ServiceAccount in kube-scheduler's priority level, at the
  newest flowcontrol version the API server serves (none served: ``skipped``).
* The namespaces kai-scheduler and kai-resource-reservation (with the reservation pods' ServiceAccount
  and Role) are applied too: GPU sharing needs them wherever kai runs. kai's own RBAC and the Deployment
  are not: they matter only when kai runs in the cluster, and ``kubectl apply -k deploy/`` (or the Helm
  chart) installs them. ``kai scheduler`` refuses to run without the kai-scheduler namespace, where it keeps
  its leader-election Lease.
* ``--webhook-url URL`` registers the admission webhooks (deploy/admission.yaml) at URL instead of the
  in-cluster Service, for a ``kai scheduler --webhook-listen`` running outside the cluster: the
  certificate Secret is made (or kept) first and its CA goes in the ``caBundle``; pods of the excluded
  namespaces are never sent (their ``kubernetes.io/metadata.name`` label is written where the API server
  does not set it, before 1.21); on 1.28+ a matchCondition also limits the pod webhooks to kai's pods.
"""

from __future__ import annotations

import asyncio
import importlib.resources
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import ApiError, AsyncClient
from lightkube.config.client_adapter import AsyncClient as HttpClient
from lightkube.config.client_adapter import ConnectionParams
from lightkube.core.resource import Resource
from lightkube.core.resource_registry import resource_registry
from lightkube.generic_resource import create_global_resource, create_namespaced_resource, get_generic_resource
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.types import PatchType

from kai.k8s._kubeconfig import Config, load_config

FIELD_MANAGER = "kai-install"
CRD_FILES = (
    "crds/scheduling.run.ai_queues.yaml",
    "crds/scheduling.run.ai_podgroups.yaml",
    "crds/kai.scheduler_topologies.yaml",
    "crds/kai.scheduler_schedulingshards.yaml",
)
# the namespaces first: the reservation pods' namespace, ServiceAccount and Role are what GPU sharing needs
# wherever kai runs; kai-scheduler holds the webhooks' certificate Secret and the leader-election Lease
OBJECT_FILES = ("namespace.yaml", "resource-reservation.yaml", "priorityclasses.yaml", "queues.yaml")
ADMISSION_FILE = "admission.yaml"
WEBHOOK_EXCLUDED_NAMESPACES = ("kube-system", "kai-scheduler", "kai-resource-reservation")
MATCH_CONDITIONS_MINOR = 28  # admissionregistration.k8s.io/v1 matchConditions: beta, on by default, from 1.28
FLOWSCHEMA_FILE = "flowschema.yaml"
FLOWCONTROL_GROUP = "flowcontrol.apiserver.k8s.io"
FLOWCONTROL_VERSIONS = ("v1", "v1beta3", "v1beta2", "v1beta1")  # newest first; the spec is the same in all
ESTABLISH_TIMEOUT_S = 60.0


class InstallError(RuntimeError):
    """An object could not be applied; the message names it and the API server's answer."""


@dataclass(frozen=True, slots=True)
class Applied:
    """What one apply did: ``created``, ``configured`` (changed) or ``unchanged``."""

    kind: str
    name: str
    result: str


def deploy_dir() -> Path:
    """The deploy/ folder as shipped in the package (a symlink to the repository's deploy/ in a checkout)."""
    return Path(str(importlib.resources.files("kai.k8s").joinpath("deploy")))


def load_documents(files: Iterable[str], root: Path | None = None) -> list[dict[str, Any]]:
    """The YAML documents of FILES under ROOT (default deploy_dir()), in order, empty ones skipped."""
    root = root or deploy_dir()
    docs: list[dict[str, Any]] = []
    for f in files:
        with open(root / f, encoding="utf-8") as fh:
            docs.extend(d for d in yaml.safe_load_all(fh) if d)
    return docs


def install_documents() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(CRDs, other objects) that ``kai install`` applies."""
    return load_documents(CRD_FILES), load_documents(OBJECT_FILES)


def _register_crd(doc: dict[str, Any]) -> None:
    """Make lightkube know the kinds a CRD document defines, so their objects can be applied."""
    spec = doc["spec"]
    names = spec["names"]
    make = create_global_resource if spec["scope"] == "Cluster" else create_namespaced_resource
    for v in spec["versions"]:
        if get_generic_resource(f"{spec['group']}/{v['name']}", names["kind"]) is None:
            make(spec["group"], v["name"], names["kind"], names["plural"])


def _resource_for(doc: dict[str, Any]) -> type[Resource]:
    return resource_registry.load(doc["apiVersion"], doc["kind"])


async def _apply(client: AsyncClient, doc: dict[str, Any]) -> Applied:
    res = _resource_for(doc)
    meta = doc["metadata"]
    name, namespace = meta["name"], meta.get("namespace")
    what = f"{doc['kind']} {namespace + '/' if namespace else ''}{name}"
    try:
        try:
            before = await client.get(res, name, namespace=namespace)
            before_rv = before.metadata.resourceVersion
        except ApiError as e:
            if e.status.code != 404:
                raise
            before_rv = None
        after = await client.patch(
            res,
            name,
            doc,
            namespace=namespace,
            patch_type=PatchType.APPLY,
            field_manager=FIELD_MANAGER,
            force=True,
        )
    except ApiError as e:
        raise InstallError(f"{what}: {e.status.message or e}") from e
    if before_rv is None:
        result = "created"
    elif after.metadata.resourceVersion == before_rv:
        result = "unchanged"
    else:
        result = "configured"
    return Applied(doc["kind"], name, result)


async def _wait_served(client: AsyncClient, http: httpx2.AsyncClient, doc: dict[str, Any], timeout: float) -> None:
    """Return once the CRD in DOC is Established and its kinds are in discovery; InstallError after TIMEOUT s."""
    name, spec = doc["metadata"]["name"], doc["spec"]
    group, plural = spec["group"], spec["names"]["plural"]
    versions = [v["name"] for v in spec["versions"] if v.get("served", True)]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    conds: list[Any] = []
    while loop.time() < deadline:
        crd = await client.get(CustomResourceDefinition, name)
        conds = (crd.status.conditions if crd.status else None) or []
        if any(c.type == "Established" and c.status == "True" for c in conds) and await _discoverable(
            http, group, versions, plural
        ):
            return
        await asyncio.sleep(0.1)
    detail = "; ".join(f"{c.type}={c.status} {c.message or ''}".strip() for c in conds) or "no conditions"
    raise InstallError(f"CustomResourceDefinition {name} not served after {timeout:.0f} s ({detail})")


async def _discoverable(http: httpx2.AsyncClient, group: str, versions: list[str], plural: str) -> bool:
    """True if /apis lists GROUP with every version and each /apis/GROUP/VERSION lists PLURAL."""
    groups = await _api_groups(http)
    if groups is None or not set(versions) <= groups.get(group, set()):
        return False
    for v in versions:
        resp = await http.get(f"/apis/{group}/{v}")
        if resp.status_code != 200 or plural not in {r["name"] for r in resp.json().get("resources", [])}:
            return False
    return True


@dataclass(frozen=True)
class WebhookOptions:
    """Where the API server calls the admission webhooks, out of the cluster."""

    url: str  # https://HOST:PORT
    failure_policy: str = "Fail"  # of the pod webhooks (the CRD validators always Ignore; docs/cluster.md)


async def install(
    client: AsyncClient,
    http: httpx2.AsyncClient,
    *,
    timeout: float = ESTABLISH_TIMEOUT_S,
    webhooks: WebhookOptions | None = None,
    ca_bundle: bytes = b"",
) -> list[Applied]:
    """Apply kai's CRDs, wait until they are served, then apply the namespace, PriorityClasses and Queues.

    HTTP is a plain client for the same API server (discovery documents have no lightkube
    type). Returns one Applied per object, in the order applied. Raises InstallError on the
    first object the API server refuses (nothing after it is applied).
    """
    crds, objects = install_documents()
    applied = [await _apply(client, d) for d in crds]
    await asyncio.gather(*(_wait_served(client, http, d, timeout) for d in crds))
    for d in crds:
        _register_crd(d)
    applied += [await _apply(client, d) for d in objects]
    applied.append(await _apply_flowschema(client, http))
    if webhooks is not None:
        applied += await _apply_webhooks(client, http, webhooks, ca_bundle)
    return applied


def webhook_documents(options: WebhookOptions, ca_bundle: bytes, *, match_conditions: bool) -> list[dict[str, Any]]:
    """deploy/admission.yaml's two webhook configurations, pointed at ``options.url`` with *ca_bundle*."""
    import base64

    docs = [d for d in load_documents([ADMISSION_FILE]) if d["kind"].endswith("WebhookConfiguration")]
    ca = base64.b64encode(ca_bundle).decode()
    for doc in docs:
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": options.url.rstrip("/") + path, "caBundle": ca}
            if "pods" in hook["rules"][0]["resources"]:
                hook["failurePolicy"] = options.failure_policy
                if match_conditions:
                    hook["matchConditions"] = [
                        {"name": "kai-scheduler-pods", "expression": "object.spec.schedulerName == 'kai-scheduler'"}
                    ]
    return docs


async def _server_minor(http: httpx2.AsyncClient) -> int:
    resp = await http.get("/version")
    if resp.status_code != 200:
        return 0
    digits = "".join(ch for ch in str(resp.json().get("minor", "0")) if ch.isdigit())
    return int(digits or 0)


async def _apply_webhooks(
    client: AsyncClient, http: httpx2.AsyncClient, options: WebhookOptions, ca_bundle: bytes
) -> list[Applied]:
    from lightkube.resources.core_v1 import Namespace

    minor = await _server_minor(http)
    out = []
    for name in WEBHOOK_EXCLUDED_NAMESPACES:  # 1.20 does not label namespaces with their name
        try:
            ns = await client.get(Namespace, name)
        except ApiError as e:
            if e.status.code == 404:
                continue
            raise InstallError(f"Namespace {name}: {e.status.message or e}") from e
        if (ns.metadata.labels or {}).get("kubernetes.io/metadata.name") != name:
            patch = {"metadata": {"labels": {"kubernetes.io/metadata.name": name}}}
            await client.patch(Namespace, name, patch, patch_type=PatchType.MERGE)
            out.append(Applied("Namespace", name, "labelled kubernetes.io/metadata.name"))
    for doc in webhook_documents(options, ca_bundle, match_conditions=minor >= MATCH_CONDITIONS_MINOR):
        out.append(await _apply(client, doc))
    return out


async def _apply_flowschema(client: AsyncClient, http: httpx2.AsyncClient) -> Applied:
    """deploy/flowschema.yaml at the newest flowcontrol version served here (1.20 serves only v1beta1,
    1.29+ v1); ``skipped`` when the API server serves none (API Priority and Fairness turned off)."""
    (doc,) = load_documents([FLOWSCHEMA_FILE])
    groups = await _api_groups(http)
    if groups is None:
        raise InstallError("API discovery (/apis) did not answer; cannot choose the FlowSchema's version")
    served = groups.get(FLOWCONTROL_GROUP, set())
    version = next((v for v in FLOWCONTROL_VERSIONS if v in served), None)
    if version is None:
        return Applied(doc["kind"], doc["metadata"]["name"], "skipped (flowcontrol API not served)")
    if get_generic_resource(f"{FLOWCONTROL_GROUP}/{version}", "FlowSchema") is None:
        create_global_resource(FLOWCONTROL_GROUP, version, "FlowSchema", "flowschemas")
    return await _apply(client, {**doc, "apiVersion": f"{FLOWCONTROL_GROUP}/{version}"})


async def _api_groups(http: httpx2.AsyncClient) -> dict[str, set[str]] | None:
    """Every API group /apis lists, with its versions; None when discovery does not answer 200."""
    resp = await http.get("/apis")
    if resp.status_code != 200:
        return None
    return {g["name"]: {v["version"] for v in g.get("versions", [])} for g in resp.json().get("groups", [])}


async def install_with(
    kubeconfig: str | None, *, timeout: float = ESTABLISH_TIMEOUT_S, webhooks: WebhookOptions | None = None
) -> list[Applied]:
    """install() with clients made from KUBECONFIG (see load_config), closed afterwards: what ``kai install`` runs.
    With *webhooks*, the namespaces are applied first, then the certificate Secret is made (or kept), then
    everything else with the webhook configurations last."""
    config = load_config(kubeconfig)
    lightkube_config = config.lightkube()  # lightkube's clients apply the manifests
    client = AsyncClient(lightkube_config, field_manager=FIELD_MANAGER)
    http = HttpClient(lightkube_config, ConnectionParams())
    try:
        ca = b""
        if webhooks is not None:
            ca = await _webhook_ca(client, config, webhooks)
        return await install(client, http, timeout=timeout, webhooks=webhooks, ca_bundle=ca)
    finally:
        await client.close()
        await http.aclose()


async def _webhook_ca(client: AsyncClient, config: Config, webhooks: WebhookOptions) -> bytes:
    """The CA bundle of the webhooks' certificate Secret, made when missing (its namespace applied first)."""
    from urllib.parse import urlparse

    from kai.k8s._api import Api
    from kai.k8s._api import ApiError as KaiApiError
    from kai.k8s._webhookcert import CertStore, service_hosts

    for doc in load_documents(["namespace.yaml"]):
        await _apply(client, doc)
    host = urlparse(webhooks.url).hostname or ""
    api = Api(config)
    try:
        bundle = await CertStore(api).ensure((*service_hosts(), host))
    except KaiApiError as e:
        raise InstallError(f"webhook certificate Secret: {e}") from e
    finally:
        await api.close()
    return bundle.ca_bundle
