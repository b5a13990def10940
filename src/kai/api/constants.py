"""Every label, annotation and well-known name kai reads or writes (KAI's keys).

One module, so that a key is spelled once (kai-behaviour §3).
"""

from __future__ import annotations

SCHEDULER_NAME = "kai-scheduler"

# --- API groups and kinds -------------------------------------------------------------
GROUP_SCHEDULING = "scheduling.run.ai"
QUEUE_API_VERSION = "scheduling.run.ai/v2"
PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
TOPOLOGY_API_VERSION = "kai.scheduler/v1alpha1"
SHARD_API_VERSION = "kai.scheduler/v1"
PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"

# --- Resources ------------------------------------------------------------------------
RESOURCE_CPU = "cpu"
RESOURCE_MEMORY = "memory"
RESOURCE_GPU = "nvidia.com/gpu"
RESOURCE_PODS = "pods"

# --- Read by the pod-grouper from pods and owners -----------------------------------
LABEL_QUEUE = "kai.scheduler/queue"
LABEL_PROJECT = "project"
LABEL_USER = "user"
LABEL_PRIORITY_CLASS = "priorityClassName"
LABEL_PREEMPTIBILITY = "kai.scheduler/preemptibility"
LABEL_RAY_PRIORITY_CLASS = "ray.io/priority-class-name"
LABEL_NODE_POOL = "kai.scheduler/node-pool"
ANNOTATION_PREEMPTION_DELAY = "kai.scheduler/preemption-delay"
ANNOTATION_STALENESS_GRACE_PERIOD = "kai.scheduler/staleness-grace-period"
ANNOTATION_TOPOLOGY = "kai.scheduler/topology"
ANNOTATION_TOPOLOGY_REQUIRED = "kai.scheduler/topology-required-placement"
ANNOTATION_TOPOLOGY_PREFERRED = "kai.scheduler/topology-preferred-placement"
ANNOTATION_SEGMENT_SIZE = "kai.scheduler/segment-size"
ANNOTATION_SEGMENT_TOPOLOGY_REQUIRED = "kai.scheduler/segment-topology-required-placement"
ANNOTATION_SEGMENT_TOPOLOGY_PREFERRED = "kai.scheduler/segment-topology-preferred-placement"
ANNOTATION_BATCH_MIN_MEMBER = "kai.scheduler/batch-min-member"
SKIP_PODGROUPER = "kai.scheduler/skip-podgrouper"
LABEL_SPARK_APP_NAME = "spark-app-name"
LABEL_SPARK_APP_SELECTOR = "spark-app-selector"
POD_GROUP_NAME_PREFIX = "pg"

# --- Set by the workload controllers; read by the pod-grouper and the task order -------------------
LABEL_KUBEFLOW_JOB_NAME = "training.kubeflow.org/job-name"
LABEL_KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"
LABEL_KUBEFLOW_OPERATOR_NAME = "training.kubeflow.org/operator-name"
LABEL_RAY_CLUSTER = "ray.io/cluster"
LABEL_RAY_IS_RAY_NODE = "ray.io/is-ray-node"
LABEL_RAY_IDENTIFIER = "ray.io/identifier"
LABEL_RAY_ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
LABEL_RAY_ORIGINATED_FROM_CR_NAME = "ray.io/originated-from-cr-name"
RAY_HEAD_GROUP = "headgroup"  # the ray.io/group label of a head pod, and KAI's head subgroup
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOBSET_REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
LABEL_JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
LABEL_JOBSET_JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
LABEL_LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LABEL_LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LABEL_LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
ANNOTATION_LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
ANNOTATION_LWS_LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"
LABEL_KNATIVE_REVISION = "serving.knative.dev/revision"
ANNOTATION_KNATIVE_MIN_SCALE = "autoscaling.knative.dev/min-scale"
LABEL_JOB_NAME = "batch.kubernetes.io/job-name"
LABEL_JOB_NAME_LEGACY = "job-name"
LABEL_JOB_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LABEL_JOB_CONTROLLER_UID_LEGACY = "controller-uid"
LABEL_JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LABEL_POD_TEMPLATE_HASH = "pod-template-hash"
LABEL_STATEFULSET_POD_NAME = "statefulset.kubernetes.io/pod-name"
LABEL_POD_INDEX = "apps.kubernetes.io/pod-index"
LABEL_CONTROLLER_REVISION_HASH = "controller-revision-hash"

# --- kai sim's own annotation (not KAI's) ---------------------------------------------------------
ANNOTATION_SIM_DURATION = "kai.sim/duration"  # a pod finishes (Succeeded) this long after it was bound
# the time simulator's (docs/simulation.md): when an object is applied, counted from the simulation's start
ANNOTATION_SIM_ARRIVAL = "kai.sim/arrival"
# an evicted pod's replacement resumes from the last checkpoint, taken every this much progress
ANNOTATION_SIM_CHECKPOINT = "kai.sim/checkpoint-interval"

# --- Written by the pod-grouper ---------------------------------------------------------
ANNOTATION_POD_GROUP_NAME = "pod-group-name"
LABEL_SUBGROUP_NAME = "kai.scheduler/subgroup-name"
ANNOTATION_TOP_OWNER_METADATA = "kai.scheduler/top-owner-metadata"
DEFAULT_SUBGROUP = "default"

# --- GPU sharing (pod annotations) ----------------------------------------------------------
ANNOTATION_GPU_FRACTION = "gpu-fraction"
ANNOTATION_GPU_MEMORY = "gpu-memory"
ANNOTATION_GPU_FRACTION_NUM_DEVICES = "gpu-fraction-num-devices"
ANNOTATION_GPU_FRACTION_CONTAINER_NAME = "gpu-fraction-container-name"
ANNOTATION_MPS = "mps"
ANNOTATION_SHARED_GPU_CONFIGMAP = "runai/shared-gpu-configmap"
ANNOTATION_RECEIVED_RESOURCE_TYPE = "received-resource-type"
LABEL_GPU_GROUP = "runai-gpu-group"
ANNOTATION_RESERVE_FOR_GPU_INDEX = "run.ai/reserve_for_gpu_index"
RECEIVED_TYPE_FRACTION = "Fraction"  # received-resource-type of a shared-GPU pod

# --- GPU reservation pods (KAI's binder and resourcereservation binary) -----------------------
LABEL_APP = "app"
RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_SERVICE_ACCOUNT = "kai-resource-reservation"
RESERVATION_APP = "kai-resource-reservation"  # the app label that marks a reservation pod
RESERVATION_POD_PREFIX = "gpu-reservation"
RESERVATION_CONTAINER = "resource-reservation"
ANNOTATION_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"

# --- Device visibility (env vars written into a fraction pod's ConfigMaps) ----------------------
ENV_NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
ENV_GPU_PORTION = "GPU_PORTION"
ENV_RUNAI_NUM_OF_GPUS = "RUNAI_NUM_OF_GPUS"  # deprecated by KAI in favour of GPU_PORTION; still written
DEFAULT_GPU_FRACTION_RUNTIME_CLASS = "nvidia"  # KAI admission's gpuFractionRuntimeClassName default

# --- kai's own (beyond KAI): who may name a Queue ---------------------------------------------
# On a Queue: comma-separated namespace names or glob patterns whose pods and PodGroups may use it
# (and its descendants). No annotation: any namespace (KAI's behaviour).
ANNOTATION_QUEUE_ALLOWED_NAMESPACES = "kai.scheduler/allowed-namespaces"
ANNOTATION_NUMA_PREDICTED = "kai.scheduler/numa-placement-predicted"
ANNOTATION_NUMA_OBSERVED = "kai.scheduler/numa-placement-observed"

# --- PodGroup annotations written by the scheduler (RFC3339) ---------------------------
ANNOTATION_STALE_TIMESTAMP = "kai.scheduler/stale-podgroup-timestamp"
ANNOTATION_LAST_START_TIMESTAMP = "kai.scheduler/last-start-timestamp"
ANNOTATION_LAST_EVICTION_TIMESTAMP = "kai.scheduler/last-eviction-timestamp"
LABEL_SELECTED_NODE = "selected-node"

# --- Evict-event annotations ------------------------------------------------------------------
ANNOTATION_NUM_EVICTED_PODS = "num-evicted-pods"
ANNOTATION_EVICTOR_ACTION_TYPE = "evictor-action-type"
ANNOTATION_EVICTOR_POD_GROUP_NAME = "evictor-pod-group-name"
ANNOTATION_EVICTOR_POD_GROUP_NAMESPACE = "evictor-pod-group-namespace"

# --- Other keys the scheduler reads ------------------------------------------------------------
LABEL_TASK_PRIORITY = "kai.scheduler/task-priority"
LABEL_GPU_MEMORY = "nvidia.com/gpu.memory"
LABEL_GPU_COUNT = "nvidia.com/gpu.count"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_NODE_ROLE_GPU_WORKER = "node-role.kubernetes.io/gpu-worker"
LABEL_NODE_ROLE_CPU_WORKER = "node-role.kubernetes.io/cpu-worker"
LABEL_NODE_ROLE_MIG_ENABLED = "node-role.kubernetes.io/mig-enabled"
LABEL_KUBEFLOW_JOB_ROLE = "training.kubeflow.org/job-role"
LABEL_RAY_NODE_TYPE = "ray.io/node-type"
LABEL_RAY_GROUP = "ray.io/group"
LABEL_ACCOUNTING = "kai.scheduler/accounting"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"  # the API server labels every namespace with its name

# --- Storage (kube-scheduler's VolumeBinding and the PV controller) ---------------------------------
ANNOTATION_SELECTED_NODE = "volume.kubernetes.io/selected-node"  # where a WaitForFirstConsumer claim is provisioned
ANNOTATION_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANNOTATION_DEFAULT_STORAGE_CLASS = "storageclass.kubernetes.io/is-default-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"  # a StorageClass of static volumes only (local PVs)

DEFAULT_GPU_MEMORY_MIB = 100  # node_info.DefaultGpuMemory when the label is missing

# --- Taints Kubernetes sets itself -----------------------------------------------------------
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

# --- Priority classes (Helm defaults) ------------------------------------------------------------
PRIORITY_TRAIN = "train"
PRIORITY_BUILD_PREEMPTIBLE = "build-preemptible"
PRIORITY_BUILD = "build"
PRIORITY_INFERENCE = "inference"
DEFAULT_PRIORITY_CLASSES: dict[str, int] = {
    PRIORITY_TRAIN: 50,
    PRIORITY_BUILD_PREEMPTIBLE: 75,
    PRIORITY_BUILD: 100,
    PRIORITY_INFERENCE: 125,
}
DEFAULT_PODGROUP_PRIORITY = 50  # constants.DefaultPodGroupPriority, without a globalDefault class
NON_PREEMPTIBLE_PRIORITY_THRESHOLD = 100  # priority >= 100 is non-preemptible by default
DEFAULT_QUEUE_PRIORITY = 100
PREEMPTIBLE = "preemptible"
NON_PREEMPTIBLE = "non-preemptible"

# --- Default queues (Helm) --------------------------------------------------------------
DEFAULT_PARENT_QUEUE = "default-parent-queue"
DEFAULT_QUEUE = "default-queue"

# --- Scheduler defaults -----------------------------------------------------------------------
DEFAULT_STALENESS_GRACE_PERIOD_S = 60.0
DEFAULT_STUCK_IN_RELEASING_S = 120.0  # KAI's DefaultStuckInReleasingThreshold (2m)
DEFAULT_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
