"""verl's reward entry points, with every program in a sandbox. Point verl's custom reward
function at this file (``python -c "import engine.compat.verl as v; print(v.__file__)"``)::

    custom_reward_function.path=<that path>
    custom_reward_function.name=compute_score          # the naive and prime reward managers
    # or, with reward_model.reward_manager=batch, a whole batch judged concurrently:
    custom_reward_function.name=compute_score_batch

The code data sources verl scores itself (``codecontests``, ``apps``, ``codeforces``, ``taco``)
score as verl's ``default_compute_score`` scores them without a SandboxFusion URL: its
``prime_code`` reward, continuous (the fraction of the first ten tests passed when not all
pass), here ``engine.compat.prime_code``. Any other data source goes to verl's own
``default_compute_score``, which needs verl installed.

With ``AIRLOCK_RAY`` set (``auto``, or a cluster's address) in the reward worker's environment,
``compute_score_batch`` spreads each batch over the Ray cluster's nodes
(``engine.distributed.RayEngine``, made on the first batch and kept): inside verl's own Ray
cluster, every node with Docker judges.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextvars
import functools
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio

from .. import NotJudged, SandboxError, Settings
from ..distributed import RayEngine
from . import prime_code
from ._shared import deadline_at

__all__ = ["CODE_SOURCES", "close", "compute_score", "compute_score_batch"]

CODE_SOURCES = ("codecontests", "apps", "codeforces", "taco")
# compute_score's default for an item the sandbox could not judge: raise NotJudged.
NOT_JUDGED_RAISES: Any = object()
_clusters: dict[str, RayEngine] = {}
_clusters_lock = threading.Lock()


def _cluster() -> RayEngine | None:
    """The Ray cluster engine ``AIRLOCK_RAY`` names, opened once per process; None without it."""
    address = os.environ.get("AIRLOCK_RAY")
    if not address:
        return None
    with _clusters_lock:
        if address not in _clusters:
            cluster = RayEngine(address)
            cluster.open()
            atexit.register(cluster.close)
            _clusters[address] = cluster
        return _clusters[address]


def close() -> None:
    """Stop the cluster engines ``compute_score_batch`` opened (the next batch opens anew)."""
    with _clusters_lock:
        opened = list(_clusters.values())
        _clusters.clear()
    for cluster in opened:
        cluster.close()


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    *,
    not_judged: Any = NOT_JUDGED_RAISES,
    **kwargs: Any,
) -> float | dict[str, Any]:
    """verl's ``default_compute_score`` signature and result (a float, or verl's dict for the
    data sources that return one).

    A program the sandbox could not judge (the container engine failed around it, after the
    engine's retries; the batch's deadline passed) has no score: :class:`engine.NotJudged` is
    raised, naming why, rather than a reward of 0 that would blame the program. Pass
    ``not_judged`` (in verl, ``custom_reward_function.reward_kwargs``) to get that value
    instead, such as ``None`` for a reward manager that leaves such items out.
    """
    if data_source in CODE_SOURCES:
        try:
            return float(prime_code.compute_score(solution_str, ground_truth, continuous=True)[0])
        except SandboxError as exc:
            if not_judged is NOT_JUDGED_RAISES:
                raise NotJudged(f"the {data_source} item was not judged: {exc}") from exc
            result: float | dict[str, Any] = not_judged
            return result
    try:
        from verl.utils.reward_score import default_compute_score
    except ImportError:
        raise NotImplementedError(
            f"Airlock scores code data sources ({', '.join(CODE_SOURCES)}); {data_source!r} needs verl installed"
        ) from None
    scored: float | dict[str, Any] = default_compute_score(
        data_source, solution_str, ground_truth, extra_info, **kwargs
    )
    return scored


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    *,
    deadline_s: float | None = None,
    not_judged: Any = NOT_JUDGED_RAISES,
    **kwargs: Any,
) -> list[float | dict[str, Any]]:
    """What verl's batch reward manager calls: every item's :func:`compute_score`, judged
    concurrently through this process's one engine (its own limit on containers in flight
    applies), in input order.

    With ``deadline_s``, the batch returns by then (and a little): an item not judged by then
    is a :class:`engine.NotJudged` (raised once every item has ended) or, with ``not_judged``,
    that value in its place.
    """
    extras = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    if not len(data_sources) == len(solution_strs) == len(ground_truths) == len(extras):
        raise ValueError(
            f"the batch's lists differ in length: {len(data_sources)} data sources, {len(solution_strs)} solutions, "
            f"{len(ground_truths)} ground truths, {len(extras)} extra infos"
        )
    items = list(zip(data_sources, solution_strs, ground_truths, extras, strict=True))
    # The default travels as its absence: a node's copy of the marker would not be the marker.
    options = kwargs if not_judged is NOT_JUDGED_RAISES else {**kwargs, "not_judged": not_judged}
    cluster = _cluster()
    if cluster is not None:
        calls = [(item, options) for item in items]
        judging = functools.partial(cluster.call_many, deadline_s=deadline_s, return_exceptions=True)
        # A worker thread runs the batch's loop: the caller's thread may be running one already.
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="airlock-verl-ray") as loop:
            outcomes: list[Any] = loop.submit(anyio.run, judging, compute_score, calls).result()
    else:
        moment = None if deadline_s is None else time.monotonic() + deadline_s

        def scored(item: tuple[str, str, Any, Any]) -> float | dict[str, Any]:
            with deadline_at(moment):
                return compute_score(*item, **options)

        # As many threads as the shared engine (made from the same settings) has containers in flight.
        workers = max(1, Settings().max_concurrency)
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="airlock-verl") as pool:
            futures = [pool.submit(contextvars.copy_context().run, scored, item) for item in items]
            concurrent.futures.wait(futures)
        outcomes = [future.exception() or future.result() for future in futures]
    values: list[float | dict[str, Any]] = []
    for outcome in outcomes:
        if isinstance(outcome, NotJudged) and not_judged is not NOT_JUDGED_RAISES:
            outcome = not_judged
        if isinstance(outcome, BaseException):
            raise outcome
        values.append(outcome)
    return values
