"""A pod with no owner (KAI's ``podjob`` plugin), and Spark's driver and executors."""

from __future__ import annotations

from kai.api import constants as C
from kai.podgrouper._default import draft
from kai.podgrouper._model import Draft, Request


def pod(req: Request) -> Draft:
    """The default grouper with the pod as its own top owner: ``pg-<pod>-<uid>``, minMember 1, train.
    Spark pods (both ``spark-app-name`` and ``spark-app-selector`` labels) share one PodGroup named after
    the ``spark-app-selector`` value, so a Spark application is one job."""
    d = draft(req, owners=req.owners)
    labels = req.pod.meta.labels
    if C.LABEL_SPARK_APP_NAME in labels and C.LABEL_SPARK_APP_SELECTOR in labels:
        d.name = labels[C.LABEL_SPARK_APP_SELECTOR]
    return d
