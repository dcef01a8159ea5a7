"""The server's Prometheus metrics: requests and verdicts by dialect, the engine's load (queue
depth, containers in flight, the warm pool and its hit rate, sandboxes alive), and histograms of
container start latency and job duration. One registry per app, so that several apps in one
process (tests) never share counters."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .._engine import Engine, EngineStatistics
from ..runtime import ContainerUsage
from ..runtime._pool import PoolStatistics
from ..sandboxes._sandbox import Sandbox

__all__ = ["CONTENT_TYPE_LATEST", "ServerMetrics"]

# Seconds: from a warm container handed out at once to a cold start on a loaded machine.
START_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Seconds: from a one-line program to a long batch.
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class _EngineLoad(Collector):
    """Read at scrape time from the server's engines (nothing before they are open); the first
    holds the long-lived sandboxes."""

    def __init__(self, engines: Callable[[], list[Engine]]) -> None:
        self.engines = engines

    def collect(self) -> Iterator[Metric]:
        engines = self.engines()
        if not engines:
            return
        load = _total([engine.statistics() for engine in engines])
        yield GaugeMetricFamily(
            "airlock_containers_in_flight", "Jobs holding a container slot", value=load.containers_in_flight
        )
        yield GaugeMetricFamily("airlock_queue_depth", "Jobs waiting for a container slot", value=load.jobs_waiting)
        yield GaugeMetricFamily("airlock_pool_ready", "Warm containers ready", value=load.pool.ready)
        yield GaugeMetricFamily("airlock_pool_starting", "Warm containers being started", value=load.pool.starting)
        takes = CounterMetricFamily("airlock_pool_takes", "Containers handed to jobs, by pool hit", labels=["result"])
        takes.add_metric(["hit"], load.pool.hits)
        takes.add_metric(["miss"], load.pool.misses)
        yield takes
        yield CounterMetricFamily(
            "airlock_pool_start_failures", "Warm containers that failed to start", value=load.pool.failures
        )
        sandboxes = engines[0].sandboxes.list()
        yield GaugeMetricFamily("airlock_sandboxes_alive", "Long-lived sandboxes alive", value=len(sandboxes))
        by_state = GaugeMetricFamily("airlock_sandboxes", "Long-lived sandboxes alive, by state", labels=["state"])
        paused = sum(sandbox.paused for sandbox in sandboxes)
        by_state.add_metric(["running"], len(sandboxes) - paused)
        by_state.add_metric(["paused"], paused)
        yield by_state


def _total(loads: list[EngineStatistics]) -> EngineStatistics:
    pools = [load.pool for load in loads]
    return EngineStatistics(
        containers_in_flight=sum(load.containers_in_flight for load in loads),
        jobs_waiting=sum(load.jobs_waiting for load in loads),
        pool=PoolStatistics(
            ready=sum(pool.ready for pool in pools),
            starting=sum(pool.starting for pool in pools),
            hits=sum(pool.hits for pool in pools),
            misses=sum(pool.misses for pool in pools),
            failures=sum(pool.failures for pool in pools),
        ),
    )


class ServerMetrics:
    """Everything ``/metrics`` shows; also the engine's ``JobObserver``."""

    def __init__(self, engines: Callable[[], list[Engine]]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "airlock_requests", "HTTP requests answered", ["dialect", "status"], registry=self.registry
        )
        self.rejected = Counter(
            "airlock_requests_rejected", "Requests refused at the door", ["dialect", "reason"], registry=self.registry
        )
        self.in_progress = Gauge(
            "airlock_requests_in_progress", "Requests being answered", ["dialect"], registry=self.registry
        )
        self.request_seconds = Histogram(
            "airlock_request_seconds", "Time to answer", ["dialect"], buckets=DURATION_BUCKETS, registry=self.registry
        )
        self.verdicts = Counter(
            "airlock_verdicts",
            "Runs and submissions judged, by verdict",
            ["dialect", "verdict"],
            registry=self.registry,
        )
        self.container_start = Histogram(
            "airlock_container_start_seconds",
            "Time a job waited for its started container",
            buckets=START_BUCKETS,
            registry=self.registry,
        )
        self.job_seconds = Histogram(
            "airlock_job_seconds",
            "Time of a job's exchange with its container",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_EngineLoad(engines))

    def verdict(self, dialect: str, verdict: str) -> None:
        self.verdicts.labels(dialect, verdict).inc()

    def container_ready(self, seconds: float) -> None:
        self.container_start.observe(seconds)

    def job_finished(self, seconds: float) -> None:
        self.job_seconds.observe(seconds)

    def render(self, sandboxes: Sequence[tuple[Sandbox, ContainerUsage | None]] = ()) -> bytes:
        """The server's metrics, then each of ``sandboxes``' own (the scraping key's: the series
        name sandboxes, which are no other key's business)."""
        return generate_latest(self.registry) + generate_latest(_SandboxUsage(sandboxes))


class _SandboxUsage(CollectorRegistry):
    """Per-sandbox series, read from each sandbox's cgroup for this scrape. Disk is the last
    ``get_metrics`` sample's: measuring it runs a command in the sandbox, which a scrape does not."""

    def __init__(self, sandboxes: Sequence[tuple[Sandbox, ContainerUsage | None]]) -> None:
        super().__init__(auto_describe=False)
        self.sandboxes = sandboxes

    def collect(self) -> Iterator[Metric]:
        labels = ["sandbox_id", "template"]
        cpu = CounterMetricFamily("airlock_sandbox_cpu_seconds", "CPU time of a sandbox's processes", labels=labels)
        memory = GaugeMetricFamily("airlock_sandbox_memory_bytes", "Memory a sandbox uses", labels=labels)
        limit = GaugeMetricFamily("airlock_sandbox_memory_limit_bytes", "Memory a sandbox may use", labels=labels)
        disk = GaugeMetricFamily(
            "airlock_sandbox_disk_bytes", "Bytes in a sandbox's writable places, at its last sample", labels=labels
        )
        for sandbox, usage in self.sandboxes:
            named = [sandbox.id, sandbox.metadata.get("airlock.template", sandbox.template)]
            limit.add_metric(named, sandbox.limits.memory_mb << 20)
            if usage is not None:
                cpu.add_metric(named, usage.cpu_s)
                memory.add_metric(named, usage.memory_bytes)
            if sandbox.metrics_samples:
                disk.add_metric(named, sandbox.metrics_samples[-1].disk_used)
        yield from (cpu, memory, limit, disk)
