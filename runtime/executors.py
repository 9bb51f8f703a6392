"""Where a call runs: IREE VM contexts, one call at a time each, and on the CPU the faster of two.

An IREE VM context is thread-compatible, not thread-safe (IREE's vm/context.h), and the Python
binding releases the GIL during a call: each `Context` holds a lock, so calls from several threads
are correct and take their turns.

On the CPU, IREE's `local-task` driver runs a call's work on a pool of threads, and waking them
costs 10-40 us a call; `local-sync` runs it on the caller's thread for a few us. Neither is best
for every call, so `CpuExecutor` times both per input signature on the first calls, alternating
between them (so that the first calls' cold memory and whatever else the machine does meanwhile
fall on both alike), and keeps the faster: a call that takes `local-task` over
THREADED_ENOUGH_NS, or whose first `local-sync` call is hopelessly slower, stays on `local-task`
without more trials. Both run the same compiled code, so results do not depend on the choice. The
`local-sync` context is made on first need, sharing the loaded modules (weights are not loaded twice).
An artifact with state (buffers forward mutates, kept as globals of a context) has one context only.

A call that keeps its intermediate tensors in caller-given storage (a CPU artifact's transient
variant, kiln.compiler.transients) gets its context's `TransientStorage`, inside the context's lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import iree.runtime as rt

from .transients import TransientStorage


class Context:
    """One VM context: the artifact's modules on one IREE device, called one at a time."""

    def __init__(
        self, instance: rt.VmInstance, device: rt.HalDevice, modules: Sequence[rt.VmModule], name: str
    ) -> None:
        self.name = name
        self._vm = rt.VmContext(instance, modules=[rt.create_hal_module(instance, device), *modules])
        self._lock = threading.Lock()
        self.storage = TransientStorage(device)

    def invoke(
        self, function: rt.VmFunction, arguments: rt.VmVariantList, results: rt.VmVariantList, transients: int = 0
    ) -> None:
        """Call `function`; with `transients` (bytes), the context's storage goes in as its last argument."""
        with self._lock:
            self._lend_storage(arguments, transients)
            self._vm.invoke(function, arguments, results)

    def _lend_storage(self, arguments: rt.VmVariantList, transients: int) -> None:
        if transients:
            arguments.push_ref(self.storage.buffer(transients))

    def release_storage(self) -> None:
        with self._lock:
            self.storage.release()

    def timed_invoke(
        self, function: rt.VmFunction, arguments: rt.VmVariantList, results: rt.VmVariantList, transients: int = 0
    ) -> int:
        """`invoke`, returning the nanoseconds the call ran (not counting the wait for the lock)."""
        with self._lock:
            self._lend_storage(arguments, transients)
            start = time.perf_counter_ns()
            self._vm.invoke(function, arguments, results)
            return time.perf_counter_ns() - start


class Executor:
    """Runs every call in one context (GPU devices)."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def invoke(
        self,
        signature: Hashable,
        function: rt.VmFunction,
        arguments: rt.VmVariantList,
        results: rt.VmVariantList,
        transients: int = 0,
    ) -> None:
        self.context.invoke(function, arguments, results, transients)

    def chosen(self) -> dict[Hashable, str]:
        """The context each input signature runs in, by name, once chosen."""
        return {}


# A call that takes local-task longer than this is left there without trying one thread: the pool's
# waking cost is then well under 1% of it, and one thread could take the cores' number of times longer.
THREADED_ENOUGH_NS = 10_000_000
TRIALS = 3  # timed calls per context before choosing, after one untimed call on local-task
# local-sync's first call is slower than its next ones (first use of its memory), but not by this
# factor: a first call over this many times local-task's fastest leaves the signature on local-task.
HOPELESS = 10
CALLS_TO_CHOOSE = 1 + 2 * TRIALS  # a signature's calls until its executor is chosen, at most


class CpuExecutor(Executor):
    """local-task or local-sync, whichever ran a signature's calls faster (see the module docstring).

    Per signature: one untimed call on local-task, then TRIALS timed calls on each, alternating
    (unless local-task's were slow enough that threads surely pay); the faster fastest call wins.
    """

    def __init__(self, context: Context, make_sync: Callable[[], Context]) -> None:
        super().__init__(context)
        self._make_sync = make_sync
        self._sync: Context | None = None
        self._chosen: dict[Hashable, Context] = {}
        self._trials: dict[Hashable, _Trial] = {}
        self._lock = threading.Lock()

    def invoke(
        self,
        signature: Hashable,
        function: rt.VmFunction,
        arguments: rt.VmVariantList,
        results: rt.VmVariantList,
        transients: int = 0,
    ) -> None:
        context = self._chosen.get(signature)
        if context is not None:
            context.invoke(function, arguments, results, transients)
            return
        context = self._next_trial(signature)
        elapsed = context.timed_invoke(function, arguments, results, transients)
        self._record(signature, context, elapsed)

    def chosen(self) -> dict[Hashable, str]:
        return {signature: context.name for signature, context in self._chosen.items()}

    def _next_trial(self, signature: Hashable) -> Context:
        with self._lock:
            trial = self._trials.setdefault(signature, _Trial())
            if len(trial.task) - 1 <= len(trial.sync):  # task[0] is the untimed call
                return self.context
            if self._sync is None:
                self._sync = self._make_sync()
            return self._sync

    def _record(self, signature: Hashable, context: Context, elapsed_ns: int) -> None:
        with self._lock:
            trial = self._trials.get(signature)
            if trial is None:  # chosen meanwhile, by a call from another thread
                return
            (trial.task if context is self.context else trial.sync).append(elapsed_ns)
            fastest_task = min(trial.task[1:], default=None)
            if fastest_task is None:
                return
            if fastest_task > THREADED_ENOUGH_NS or (trial.sync and trial.sync[0] > HOPELESS * fastest_task):
                self._decide(signature, self.context)
            elif len(trial.sync) >= TRIALS and len(trial.task) > TRIALS:
                assert self._sync is not None
                self._decide(signature, self._sync if min(trial.sync) < fastest_task else self.context)

    def _decide(self, signature: Hashable, context: Context) -> None:
        self._chosen[signature] = context
        del self._trials[signature]
        if not self._trials:  # no signature on trial: a context no signature chose needs no storage
            for other in (self.context, self._sync):
                if other is not None and other not in self._chosen.values():
                    other.release_storage()


@dataclass
class _Trial:
    """The nanoseconds of one signature's calls so far, per context."""

    task: list[int] = field(default_factory=list)
    sync: list[int] = field(default_factory=list)
