"""KAI's default grouper (``defaultgrouper/default_grouper.go``): the base every kind starts from.

One PodGroup per top owner, named ``pg-<owner>-<uid>``, minMember 1; queue, priority class,
preemptibility, preemption delay, staleness grace period and topology read from the owners and the
pod in KAI's order (reference sections 3 and 7). kai differs in one way on purpose: a value KAI
would log and skip (a preemptibility label that is not ``preemptible``/``non-preemptible``, a
malformed duration) is a ManifestError naming the object and field, because a simulation that
silently drops what the user wrote would mislead.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.duration import parse_duration
from kai.api.errors import ManifestError
from kai.api.objects import Pod, TopologyConstraint
from kai.api.workloads import Workload
from kai.podgrouper._model import Draft, Origin, Request


def is_real_uid(uid: str) -> bool:
    """kai makes up ``Kind/ns/name`` uids for objects applied without one; a Kubernetes uid has no '/'."""
    return bool(uid) and "/" not in uid


def podgroup_name(obj: Workload | Pod) -> str:
    """``pg-<name>-<uid>`` as KAI names PodGroups; ``pg-<name>`` when the uid is one kai made up, so that
    simulated names stay readable."""
    base = f"{C.POD_GROUP_NAME_PREFIX}-{obj.meta.name}"
    return f"{base}-{obj.meta.uid}" if is_real_uid(obj.meta.uid) else base


def origin(obj: Workload | Pod, field: str = "") -> Origin:
    return Origin(obj.kind, obj.meta.namespace or "", obj.meta.name, field)


def _label(key: str) -> str:
    return f"metadata.labels.{key}"


def _annotation(key: str) -> str:
    return f"metadata.annotations.{key}"


def queue_of(top: Workload, pod: Pod) -> tuple[str, Origin]:
    """The queue label on the top owner, then on the pod; then the project label (``<project>-<pool>`` when
    the pod has the node-pool label); then default-queue (CalcPodGroupQueue)."""
    sources: tuple[Workload | Pod, ...] = (top, pod)
    for obj in sources:
        if C.LABEL_QUEUE in obj.meta.labels:
            return obj.meta.labels[C.LABEL_QUEUE], origin(obj, _label(C.LABEL_QUEUE))
    for obj in sources:
        project = obj.meta.labels.get(C.LABEL_PROJECT)
        if project is not None:
            if not project:
                break  # KAI: an empty project label means no project
            pool = pod.meta.labels.get(C.LABEL_NODE_POOL)
            return (f"{project}-{pool}" if pool is not None else project), origin(obj, _label(C.LABEL_PROJECT))
    return C.DEFAULT_QUEUE, origin(top)


def _explicit_priority(owner: Workload, pod: Pod) -> tuple[str, Origin | None]:
    """calcPodGroupPriorityClass: the owner's label, else the pod's label, else the pod's spec."""
    if C.LABEL_PRIORITY_CLASS in owner.meta.labels:
        return owner.meta.labels[C.LABEL_PRIORITY_CLASS], origin(owner, _label(C.LABEL_PRIORITY_CLASS))
    if C.LABEL_PRIORITY_CLASS in pod.meta.labels:
        return pod.meta.labels[C.LABEL_PRIORITY_CLASS], origin(pod, _label(C.LABEL_PRIORITY_CLASS))
    if pod.priority_class_name:
        return pod.priority_class_name, origin(pod, "spec.priorityClassName")
    return "", None


def priority_of(req: Request, owners: tuple[Workload, ...], default: str) -> tuple[str, Origin]:
    """calcPriorityClassWithDefaults without the per-type ConfigMap: per owner (pod's owner first), its label,
    the pod's label or the pod's spec, the first that names an existing class; else the kind's default."""
    for owner in owners:
        name, where = _explicit_priority(owner, req.pod)
        if name and where is not None and req.priority_class_exists(name):
            return name, where
    return default, origin(req.top)


def priority_class_for(req: Request, top: Workload, default: str) -> tuple[str, Origin]:
    """CalcPodGroupPriorityClass(top, pod, default): the same rule over the top owner alone."""
    return priority_of(req, (top,), default)


def preemptibility_of(owners: tuple[Workload, ...], pod: Pod) -> str:
    """The kai.scheduler/preemptibility label on the owners (pod's owner first), then on the pod."""
    chain: tuple[Workload | Pod, ...] = (*owners, pod)
    for obj in chain:
        value = obj.meta.labels.get(C.LABEL_PREEMPTIBILITY)
        if value is None:
            continue
        if value not in (C.PREEMPTIBLE, C.NON_PREEMPTIBLE):
            raise ManifestError(
                f"{value!r} is not {C.PREEMPTIBLE} or {C.NON_PREEMPTIBLE}",
                obj=origin(obj).ref,
                field=_label(C.LABEL_PREEMPTIBILITY),
            )
        return value
    return ""


def _duration_annotation(owners: tuple[Workload, ...], pod: Pod, key: str, *, negative_ok: bool) -> float | None:
    """The first owner (then the pod) carrying the annotation decides."""
    chain: tuple[Workload | Pod, ...] = (*owners, pod)
    for obj in chain:
        text = obj.meta.annotations.get(key)
        if text is None:
            continue
        try:
            seconds = parse_duration(text)
        except ValueError as e:
            raise ManifestError(str(e), obj=origin(obj).ref, field=_annotation(key)) from None
        if seconds < 0 and not negative_ok:
            raise ManifestError(f"{text!r} must not be negative", obj=origin(obj).ref, field=_annotation(key))
        return seconds
    return None


def topology_of(annotations: dict[str, str]) -> TopologyConstraint | None:
    """The PodGroup-level constraint from the kai.scheduler/topology* annotations, if any is set."""
    tc = TopologyConstraint(
        topology=annotations.get(C.ANNOTATION_TOPOLOGY, ""),
        required_level=annotations.get(C.ANNOTATION_TOPOLOGY_REQUIRED, ""),
        preferred_level=annotations.get(C.ANNOTATION_TOPOLOGY_PREFERRED, ""),
    )
    return tc if (tc.topology or tc.required_level or tc.preferred_level) else None


def draft(
    req: Request, default_priority: str = C.PRIORITY_TRAIN, *, owners: tuple[Workload, ...] | None = None
) -> Draft:
    """DefaultGrouper.GetPodGroupMetadata(top, pod, owners...). Kind plugins call it without owners, as KAI's
    do, so that only the top owner's labels count; the registered default grouper passes the whole chain."""
    top, pod = req.top, req.pod
    chain = owners if owners else (top,)
    queue, queue_from = queue_of(top, pod)
    priority, priority_from = priority_of(req, chain, default_priority)
    labels = dict(top.meta.labels)
    if C.LABEL_USER not in labels and C.LABEL_USER in pod.meta.labels:
        labels[C.LABEL_USER] = pod.meta.labels[C.LABEL_USER]
    annotations = {C.LABEL_USER: pod.meta.annotations[C.LABEL_USER]} if C.LABEL_USER in pod.meta.annotations else {}
    annotations.update(top.meta.annotations)
    return Draft(
        name=podgroup_name(top),
        namespace=pod.meta.namespace or "default",
        owner=top,
        labels=labels,
        annotations=annotations,
        queue=queue,
        queue_from=queue_from,
        priority_class=priority,
        priority_from=priority_from,
        preemptibility=preemptibility_of(chain, pod),
        min_member=1,
        topology=topology_of(top.meta.annotations),
        preemption_delay=_duration_annotation(chain, pod, C.ANNOTATION_PREEMPTION_DELAY, negative_ok=False),
        staleness_grace_period=_duration_annotation(chain, pod, C.ANNOTATION_STALENESS_GRACE_PERIOD, negative_ok=True),
    )


def default(req: Request) -> Draft:
    """The default grouper as the registry uses it: StatefulSet, ReplicaSet, and any kind without a plugin."""
    return draft(req, owners=req.owners)
