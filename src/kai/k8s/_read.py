"""Read a live cluster once, as ``kai scheduler``'s informers would on start: every kind the scheduler
watches, listed through the same decoders and parsers (``_decode.KINDS``) into a Store. Read-only: only
GET requests are sent (``kai explain``, ``kai snapshot``, ``kai dashboard`` never write).

Rules: a kind whose API is not served is empty, except kai's own CRDs (Queue, PodGroup): without them
nothing kai does makes sense, so ``CrdsMissing`` says which is missing. An object the parser rejects is
left out and reported (kind, name, field), as the scheduler reports it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kai.api.errors import ManifestError
from kai.k8s._api import Api, ApiError, load_config
from kai.k8s._decode import KINDS, PDB_V1BETA1, KindSpec
from kai.store import Store

REQUIRED_KINDS = ("Queue", "PodGroup")  # kai's CRDs
PAGE = 500


class CrdsMissing(Exception):
    """The API server does not serve kai's CRDs (kai install was not run)."""


@dataclass
class ClusterRead:
    """What one read of the cluster gave: the Store, each kind's decoded documents (only the fields kai
    reads, for ``kai snapshot``), and the objects left out as invalid."""

    store: Store
    docs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # kind -> documents, API order
    api_versions: dict[str, str] = field(default_factory=dict)  # kind -> the version it was read at
    invalid: list[str] = field(default_factory=list)


async def pdb_spec(api: Api) -> KindSpec:
    """policy/v1 where served (1.21+), else policy/v1beta1 (Kubernetes 1.20)."""
    try:
        doc = await api.request("GET", "/apis/policy/v1")
        if any(r.get("name") == "poddisruptionbudgets" for r in doc.get("resources", [])):
            return next(k for k in KINDS if k.kind == "PodDisruptionBudget")
    except ApiError as e:
        if e.code not in (403, 404):
            raise
    return PDB_V1BETA1


async def _list(api: Api, spec: KindSpec) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cont = ""
    while True:
        params = {"limit": str(PAGE)}
        if cont:
            params["continue"] = cont
        data = await api.get_raw(spec.path(), params)
        try:
            meta, page = spec.codec.decode_list(data)
        except (msgspec.MsgspecError, KeyError, TypeError) as e:
            raise ApiError(0, f"malformed {spec.kind} list: {e}") from e
        items += [d.doc for d in page]
        if not meta.cont:
            return items
        cont = meta.cont


async def read_with(api: Api) -> ClusterRead:
    specs = [k for k in KINDS if k.kind != "PodDisruptionBudget"] + [await pdb_spec(api)]
    lists = await asyncio.gather(*(_list(api, s) for s in specs), return_exceptions=True)
    out = ClusterRead(Store())
    missing = []
    for spec, got in zip(specs, lists):
        if isinstance(got, ApiError) and (got.code == 404 or (got.code == 403 and spec.optional)):
            if spec.kind in REQUIRED_KINDS and got.code == 404:
                missing.append(f"{spec.plural}.{spec.api_version.split('/')[0]}")
            got = []
        if isinstance(got, BaseException):
            raise got
        out.api_versions[spec.kind] = spec.api_version
        docs = out.docs.setdefault(spec.kind, [])
        for doc in got:
            try:
                obj = spec.parse(doc)
            except ManifestError as e:
                meta = doc.get("metadata") or {}
                name = "/".join(x for x in (meta.get("namespace"), meta.get("name")) if x)
                out.invalid.append(f"{spec.kind} {name} is ignored: {e.field}: {e.message}" if e.field else str(e))
                continue
            out.store.put(obj)
            docs.append(doc)
    if missing:
        raise CrdsMissing(
            f"the API server does not serve kai's CRDs ({', '.join(missing)}): run `kai install` first "
            "(or kubectl apply -k deploy/)"
        )
    return out


def read_cluster(kubeconfig: str | None) -> ClusterRead:
    """List every kind once (blocking); ApiError, CrdsMissing or a kubeconfig error on failure."""

    async def main() -> ClusterRead:
        api = Api(load_config(kubeconfig), max_connections=16)
        try:
            return await read_with(api)
        finally:
            await api.close()

    return asyncio.run(main())
