"""The ``kai`` command line: wiring only. Subcommands with heavy imports load on first use."""

from __future__ import annotations

import importlib
import sys
from typing import Any, ClassVar, NoReturn

import click

EXIT_BAD_INPUT = 2


def _fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` in red on stderr and exit with *code*. rich is imported here, on the
    error path only: ``kai scheduler`` starts without it."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print("[red]error:[/] " + escape(message), highlight=False, soft_wrap=True)
    sys.exit(code)


class _LazyGroup(click.Group):
    """A group whose listed subcommands are imported only when run or listed (click's documented
    pattern): ``kai scheduler`` starts without importing the simulator."""

    lazy: ClassVar[dict[str, str]] = {
        "sim": "kai.sim.command:sim",
        "explain": "kai.explain.command:explain",
        "snapshot": "kai.explain.command:snapshot",
        "dashboard": "kai.dashboard.command:dashboard",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module, _, attr = self.lazy[cmd_name].partition(":")
            cmd: Any = getattr(importlib.import_module(module), attr)
            return cmd
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup)
@click.version_option(package_name="kai")
def main() -> None:
    """kai: a GPU-aware batch scheduler that speaks NVIDIA KAI Scheduler's API."""


@main.group()
def bench() -> None:
    """Benchmarks of kai's scheduling decisions."""


@bench.command("trace")
@click.option("--trace", default="default", show_default=True, help="Trace variant (default, cpu050, ...) or pod CSV.")
@click.option("--nodes", default=None, help="Node CSV.  [default: the trace data's GPU node list]")
@click.option(
    "--policy",
    default="best",
    show_default=True,
    help="best (kai's fragmentation), default (binpack), random, dotprod, gpuclustering, gpupacking, bestfit, fgd.",
)
@click.option("--seeds", default="42-51", show_default=True, help="Seeds: 42-51, 42,43 or a mix.")
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def bench_trace(trace: str, nodes: str | None, policy: str, seeds: str, fmt: str) -> None:
    """Replay the Alibaba GPU trace with the FGD paper's fill-up protocol; report unallocated GPU %."""
    import json

    from kai.trace.bench import parse_seeds, render_text, run_trace_bench

    try:
        doc = run_trace_bench(trace, policy, parse_seeds(seeds), nodes)
    except ValueError as e:  # TraceError included
        _fail(str(e), EXIT_BAD_INPUT)
    click.echo(json.dumps(doc, indent=2) if fmt == "json" else render_text(doc))


EXIT_INSTALL_FAILED = 1

# Both cluster commands find the API server the same way.
_kubeconfig_option = click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Kubeconfig file. Default: in-cluster config, then $KUBECONFIG, then ~/.kube/config.",
)


@main.command()
@_kubeconfig_option
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Seconds to wait for each CRD to be Established and served.",
)
@click.option(
    "--webhook-url",
    default=None,
    help="Register the admission webhooks at this https URL (a `kai scheduler --webhook-listen` out of the cluster).",
)
@click.option(
    "--webhook-failure-policy",
    type=click.Choice(["Fail", "Ignore"]),
    default="Fail",
    show_default=True,
    help="What the API server does with a pod when the webhook does not answer (with --webhook-url).",
)
def install(kubeconfig: str | None, timeout: float, webhook_url: str | None, webhook_failure_policy: str) -> None:
    """Apply kai's CRDs, PriorityClasses and default Queues to a cluster (server-side apply; safe to re-run).

    The objects are deploy/'s YAML, the same that `kubectl apply -k deploy/` installs with RBAC
    and the scheduler Deployment.
    """
    # Imported here: lightkube and its HTTP stack are not needed by `kai sim`.
    import asyncio

    import httpx2
    from lightkube import ConfigError as KubeConfigError

    from kai.k8s._kubeconfig import ConfigError
    from kai.k8s.install import InstallError, WebhookOptions, install_with

    webhooks = None
    if webhook_url is not None:
        if not webhook_url.startswith("https://"):
            _fail(f"--webhook-url: {webhook_url!r} must be an https:// URL", EXIT_BAD_INPUT)
        webhooks = WebhookOptions(webhook_url, webhook_failure_policy)
    try:
        applied = asyncio.run(install_with(kubeconfig, timeout=timeout, webhooks=webhooks))
    except (InstallError, ConfigError, KubeConfigError) as e:
        _fail(str(e), EXIT_INSTALL_FAILED)
    except httpx2.TransportError as e:
        _fail("cannot reach the API server: " + (str(e) or type(e).__name__), EXIT_INSTALL_FAILED)
    for a in applied:
        click.echo(f"{a.kind.lower()}/{a.name} {a.result}")


@main.command("resource-reservation")
@_kubeconfig_option
@click.option("--pod-name", envvar="POD_NAME", default="", help="This pod's name (the downward API sets POD_NAME).")
@click.option("--pod-namespace", envvar="POD_NAMESPACE", default="", help="This pod's namespace (POD_NAMESPACE).")
@click.option("--print-only", is_flag=True, help="Print the GPU's UUID and exit; touch no pod (a check on a node).")
@click.option("--exit-after-patch", is_flag=True, help="Exit once the pod is annotated instead of holding on.")
def resource_reservation(
    kubeconfig: str | None, pod_name: str, pod_namespace: str, print_only: bool, exit_after_patch: bool
) -> None:
    """Run inside a GPU reservation pod: find the pod's one GPU with NVML and write its UUID to the pod's
    annotation run.ai/reserve_for_gpu_index, then hold the GPU until terminated (KAI's resourcereservation)."""
    from kai.k8s.discovery import DiscoveryError, gpu_uuid, hold_until_terminated, reserve

    try:
        if print_only:
            click.echo(gpu_uuid())
            return
        if not pod_name or not pod_namespace:
            raise DiscoveryError("POD_NAME and POD_NAMESPACE must name this pod (the downward API sets them)")
        from lightkube import Client, KubeConfig

        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        client = Client(config, field_manager="kai-resource-reservation")
        uuid = reserve(client, pod_namespace, pod_name)
        client.close()
    except DiscoveryError as e:
        _fail(str(e), EXIT_INSTALL_FAILED)
    click.echo(f"pod {pod_namespace}/{pod_name} reserves GPU {uuid}")
    if not exit_after_patch:
        hold_until_terminated()


@main.command()
@_kubeconfig_option
@click.option(
    "--schedule-period",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="Seconds between cycles (new pods start one at once).",
)
@click.option(
    "--actions", default=None, help="Comma-separated actions, in order (default: the SchedulingShard's, else all five)."
)
@click.option(
    "--shard",
    default="default",
    show_default=True,
    help="The SchedulingShard to serve: its settings, and only the nodes, queues and PodGroups of its "
    "partitionLabelValue (docs/cluster.md#schedulingshards).",
)
@click.option(
    "--nodepool-label-key",
    default="kai.scheduler/node-pool",
    show_default=True,
    help="The label whose value (a shard's partitionLabelValue) names a node pool.",
)
@click.option(
    "--leader-elect/--no-leader-elect", default=True, show_default=True, help="Hold a Lease; a second replica waits."
)
@click.option("--leader-elect-namespace", default="kai-scheduler", show_default=True, help="Namespace of the Lease.")
@click.option(
    "--leader-elect-name",
    default=None,
    help="Name of the Lease. [default: kai-scheduler, plus -<partitionLabelValue> for a labelled pool]",
)
@click.option(
    "--lease-duration",
    default=15.0,
    show_default=True,
    type=click.FloatRange(min=0.5),
    help="Seconds a lease is valid without renewal.",
)
@click.option(
    "--renew-deadline",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.2),
    help="Seconds the leader may fail to renew before it steps down.",
)
@click.option(
    "--retry-period",
    default=2.0,
    show_default=True,
    type=click.FloatRange(min=0.05),
    help="Seconds between lease attempts and renewals.",
)
@click.option("--identity", default="", help="Lease holder identity (default: $HOSTNAME plus a random suffix).")
@click.option(
    "--metrics-bind-address",
    default="0.0.0.0:8080",
    show_default=True,
    help="host:port of /metrics, /healthz, /readyz; port 0 turns them off.",
)
@click.option(
    "--dashboard-listen",
    default="",
    help="host:port of the read-only web dashboard (e.g. 127.0.0.1:8090); off by default.",
)
@click.option(
    "--bind-concurrency",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Bind calls in flight at once.",
)
@click.option(
    "--watch-timeout",
    default=30,
    show_default=True,
    type=click.IntRange(min=1),
    help="Seconds each watch stays open before it is opened again (a quiet kind is heard from this often).",
)
@click.option(
    "--watch-progress-deadline",
    default=45.0,
    show_default=True,
    type=click.FloatRange(min=1.0),
    help="Seconds without word from the API server after which a kind is not live (no cycle runs).",
)
@click.option(
    "--status-qps",
    default=100.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Status writes (conditions, PodGroup and Queue status) a second; --status-burst above it.",
)
@click.option("--status-burst", default=500.0, show_default=True, type=click.FloatRange(min=1.0))
@click.option(
    "--healthz-cycle-periods",
    default=60,
    show_default=True,
    type=click.IntRange(min=1),
    help="/healthz fails on the leader when no cycle completed for this many periods (60 s at least).",
)
@click.option(
    "--event-loop",
    default="uvloop",
    show_default=True,
    type=click.Choice(["uvloop", "asyncio"]),
    help="uvloop (about 10% less CPU per bind and watch event) or Python's own asyncio loop.",
)
@click.option(
    "--webhook-listen",
    default=None,
    help="host:port of the admission webhooks (HTTPS; deploy/admission.yaml, `kai install --webhook-url`).",
)
@click.option(
    "--webhook-metrics-port",
    type=int,
    default=None,
    help="Port of the webhook process's own /metrics (kai_admission_*), on the --webhook-listen host. [default: none]",
)
@click.option(
    "--webhook-cert-namespace",
    default="kai-scheduler",
    show_default=True,
    help="Namespace of the webhooks' certificate Secret kai-admission-webhook-tls-secret.",
)
@click.option(
    "--gpu-fraction-runtime-class-name",
    default="nvidia",
    show_default=True,
    help="runtimeClassName the webhook gives GPU-fraction pods that name none ('' for none).",
)
@click.option("--reservation-image", default="", help="Image of GPU reservation pods. [default: this pod's own image]")
@click.option(
    "--reservation-runtime-class-name", default="", help="runtimeClassName of GPU reservation pods. [default: none]"
)
@click.option(
    "--reservation-timeout",
    default=40.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Seconds to wait for a new reservation pod to report its GPU before the bind is given up.",
)
@click.option(
    "--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"])
)
def scheduler(
    kubeconfig: str | None,
    schedule_period: float,
    actions: str | None,
    shard: str,
    nodepool_label_key: str,
    leader_elect: bool,
    leader_elect_namespace: str,
    leader_elect_name: str | None,
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    identity: str,
    metrics_bind_address: str,
    dashboard_listen: str,
    bind_concurrency: int,
    watch_timeout: int,
    watch_progress_deadline: float,
    status_qps: float,
    status_burst: float,
    healthz_cycle_periods: int,
    event_loop: str,
    webhook_listen: str | None,
    webhook_metrics_port: int | None,
    webhook_cert_namespace: str,
    gpu_fraction_runtime_class_name: str,
    reservation_image: str,
    reservation_runtime_class_name: str,
    reservation_timeout: float,
    log_level: str,
) -> None:
    """Schedule a Kubernetes cluster: watches, the engine, binds, evictions, events, statuses and the
    pod-grouper in one process, for pods with schedulerName kai-scheduler (docs/cluster.md)."""
    from kai.k8s import _early

    bad_kubeconfig: Exception | None = None
    early: _early.EarlyStart | None = None
    try:  # the first lists of pods and nodes go out before the rest is imported (kai.k8s._early)
        early = _early.begin(kubeconfig, event_loop)
    except (KeyError, TypeError, ValueError, OSError) as e:  # ValueError: kai.k8s._kubeconfig.ConfigError
        bad_kubeconfig = e  # reported after the flags, as before
    try:
        from kai.k8s._leader import LeaseConfig
        from kai.k8s._logging import setup_logging
        from kai.k8s._scheduler import SchedulerOptions, default_identity, run_scheduler
        from kai.scheduler.conf import KNOWN_ACTIONS

        chosen = tuple(a.strip() for a in actions.split(",") if a.strip()) if actions else None
        unknown = [a for a in chosen or () if a not in KNOWN_ACTIONS]
        if unknown:
            _fail(f"--actions: unknown action {unknown[0]!r} (known: {', '.join(KNOWN_ACTIONS)})", EXIT_BAD_INPUT)
        if not renew_deadline < lease_duration:
            _fail("--renew-deadline must be shorter than --lease-duration", EXIT_BAD_INPUT)
        if not watch_progress_deadline > watch_timeout:
            _fail("--watch-progress-deadline must be longer than --watch-timeout", EXIT_BAD_INPUT)
        host, _, port_text = metrics_bind_address.rpartition(":")
        if not port_text.isdigit():
            _fail(f"--metrics-bind-address: {metrics_bind_address!r} is not host:port", EXIT_BAD_INPUT)
        webhook = None
        if webhook_listen is not None:
            w_host, _, w_port = webhook_listen.rpartition(":")
            if not w_port.isdigit() or not w_host:
                _fail(f"--webhook-listen: {webhook_listen!r} is not host:port", EXIT_BAD_INPUT)
            webhook = (w_host.strip("[]"), int(w_port))
        from kai.k8s._gpushare import ReservationOptions

        if dashboard_listen:
            from kai.dashboard import split_listen

            try:
                split_listen(dashboard_listen)
            except ValueError as e:
                _fail(f"--dashboard-listen: {e}", EXIT_BAD_INPUT)
        setup_logging(log_level)
        options = SchedulerOptions(
            kubeconfig=kubeconfig,
            schedule_period_s=schedule_period,
            actions=chosen,
            shard=shard,
            nodepool_label_key=nodepool_label_key,
            shard_lease=leader_elect_name is None,
            leader_elect=leader_elect,
            lease=LeaseConfig(
                leader_elect_namespace,
                leader_elect_name or "kai-scheduler",
                lease_duration,
                renew_deadline,
                retry_period,
            ),
            identity=identity or default_identity(),
            metrics_address=host or "0.0.0.0",
            metrics_port=int(port_text) or None,
            bind_concurrency=bind_concurrency,
            watch_timeout_s=watch_timeout,
            progress_deadline_s=watch_progress_deadline,
            status_qps=status_qps,
            status_burst=status_burst,
            health_cycle_periods=healthz_cycle_periods,
            webhook_listen=webhook,
            webhook_metrics_port=webhook_metrics_port,
            webhook_cert_namespace=webhook_cert_namespace,
            gpu_fraction_runtime_class=gpu_fraction_runtime_class_name,
            reservation=ReservationOptions(
                image=reservation_image, runtime_class=reservation_runtime_class_name, timeout_s=reservation_timeout
            ),
            dashboard_listen=dashboard_listen,
        )
        if bad_kubeconfig is not None:  # a bad kubeconfig is an error now, not a traceback later
            where = kubeconfig or "in-cluster config / $KUBECONFIG / ~/.kube/config"
            what = f"missing {bad_kubeconfig}" if isinstance(bad_kubeconfig, KeyError) else str(bad_kubeconfig)
            _fail(f"{where}: {what}", EXIT_BAD_INPUT)
        from kai.k8s._leader import LeaseNamespaceMissing
        from kai.k8s._shard import ShardMissing

        try:
            code = run_scheduler(options, event_loop=event_loop, early=early)
        except KeyboardInterrupt:
            code = 0
        except (LeaseNamespaceMissing, ShardMissing) as e:
            _fail(str(e), EXIT_BAD_INPUT)
        sys.exit(code)
    finally:  # an exit before the scheduler ran (a bad flag): the lists still out are cancelled, quietly
        if early is not None:
            early.close()
