"""A fresh process that puts one kiln workload under load and prints its figures as one JSON line.

    python load_child.py VMFB MODE COUNT [THREADS]

MODE is one of:
  threads     THREADS threads call the artifact COUNT times in all, each result checked bit for
              bit against the single-threaded result for its input
  sequential  COUNT calls one after another; resident memory read every COUNT/10 calls
  cycles      COUNT times: load the artifact, call it once, drop it
  compiles    COUNT compiles of a small model with kiln.compile, each called once

The figures: calls (or cycles) per second, resident memory (RSS) after warming up and at the end,
growth per 100k calls (or per 1,000 cycles), open file descriptors and threads before and after,
and the number of wrong results.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import kiln

PAGE = os.sysconf("SC_PAGE_SIZE")


def resident() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def counts() -> dict[str, int]:
    return {"fds": len(os.listdir("/proc/self/fd")), "threads": threading.active_count(), "os_threads": len(os.listdir("/proc/self/task"))}


def inputs_for(module: kiln.runtime.LoadedModule, count: int) -> list[tuple[torch.Tensor, ...]]:
    """`count` input tuples for the first function; dynamic sizes drawn within their bounds (up to 16)."""
    generator = torch.Generator().manual_seed(5)
    spec = module.functions[module.manifest.entry].spec
    pool = []
    for _ in range(count):
        sizes = {}
        for symbol, (low, high) in spec.symbols.items():
            top = min(high if high is not None else 16, 16)
            sizes[symbol] = int(torch.randint(max(low or 0, 1), top + 1, (), generator=generator))
        shapes = [[size if isinstance(size, int) else sizes.get(size, 4) for size in tensor.shape] for tensor in spec.inputs]
        pool.append(tuple(_random(tensor.dtype, shape, generator) for tensor, shape in zip(spec.inputs, shapes, strict=True)))
    return pool


def _random(dtype: str, shape: list[int], generator: torch.Generator) -> torch.Tensor:
    if dtype.startswith("int"):
        return torch.randint(0, 10, shape, generator=generator)
    return torch.randn(shape, generator=generator)


def threads(vmfb: Path, total: int, workers: int) -> dict:
    module = kiln.load(vmfb)
    pool = inputs_for(module, 16)
    references = [module(*inputs) for inputs in pool]
    wrong = [0] * workers
    errors: list[str] = []
    per_worker = total // workers

    def work(index: int) -> None:
        try:
            for call in range(per_worker):
                choice = (index * 7 + call) % len(pool)
                if not torch.equal(module(*pool[choice]), references[choice]):
                    wrong[index] += 1
        except Exception as error:  # counted: the parent fails the test on any
            errors.append(f"{type(error).__name__}: {error}")

    before, started = resident(), time.perf_counter()
    workers_list = [threading.Thread(target=work, args=(index,)) for index in range(workers)]
    for worker in workers_list:
        worker.start()
    for worker in workers_list:
        worker.join()
    seconds = time.perf_counter() - started
    calls = per_worker * workers
    return {"calls": calls, "threads": workers, "seconds": seconds, "calls_per_s": calls / seconds,
            "wrong": sum(wrong), "errors": errors[:5], "rss_before": before, "rss_after": resident()}  # fmt: skip


def sequential(vmfb: Path, total: int) -> dict:
    module = kiln.load(vmfb)
    pool = inputs_for(module, 16)
    reference = module(*pool[0])
    for call in range(1000):  # warm-up: allocator pools, caches, lazily made IREE state
        module(*pool[call % len(pool)])
    gc.collect()
    readings = [resident()]
    before_counts, started = counts(), time.perf_counter()
    step = max(total // 10, 1)
    for call in range(total):
        module(*pool[call % len(pool)])
        if (call + 1) % step == 0:
            readings.append(resident())
    seconds = time.perf_counter() - started
    gc.collect()
    readings.append(resident())
    return {
        "calls": total, "seconds": seconds, "calls_per_s": total / seconds, "rss": readings,
        "growth_per_100k": (readings[-1] - readings[0]) * 100_000 / total,
        "wrong": int(not torch.equal(module(*pool[0]), reference)), "before": before_counts, "after": counts(),
    }  # fmt: skip


def cycles(vmfb: Path, total: int) -> dict:
    x = None
    readings = []
    before_counts = None
    started = time.perf_counter()
    reference = None
    wrong = 0
    for cycle in range(total + 50):
        if cycle == 50:  # the first cycles warm up what stays loaded (IREE's driver, the device)
            gc.collect()
            readings.append(resident())
            before_counts, started = counts(), time.perf_counter()
        module = kiln.load(vmfb)
        x = x or inputs_for(module, 1)[0]
        result = module(*x)
        reference = result if reference is None else reference
        wrong += int(not torch.equal(result, reference))
        del module
    seconds = time.perf_counter() - started
    gc.collect()
    readings.append(resident())
    return {
        "cycles": total, "seconds": seconds, "cycles_per_s": total / seconds, "rss": readings,
        "growth_per_1000": (readings[-1] - readings[0]) * 1000 / total, "wrong": wrong,
        "before": before_counts, "after": counts(),
    }  # fmt: skip


def compiles(total: int) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
    x = torch.randn(2, 16)
    with torch.no_grad():
        expected = model(x)
    readings, times, wrong = [], [], 0
    before_counts = None
    for index in range(total + 2):
        if index == 2:  # the first compiles load torch-mlir, IREE's compiler and their caches
            gc.collect()
            readings.append(resident())
            before_counts = counts()
        started = time.perf_counter()
        artifact = kiln.compile(model, (x,))
        times.append(time.perf_counter() - started)
        wrong += int(not torch.allclose(artifact(x), expected, rtol=1e-5, atol=1e-6))
        del artifact
    gc.collect()
    readings.append(resident())
    return {
        "compiles": total, "seconds_each": float(np.median(times[2:])), "rss": readings,
        "growth_per_compile": (readings[-1] - readings[0]) / total, "wrong": wrong,
        "before": before_counts, "after": counts(),
    }  # fmt: skip


def main() -> None:
    warnings.simplefilter("ignore")
    vmfb, mode, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    if mode == "threads":
        figures = threads(vmfb, count, int(sys.argv[4]))
    elif mode == "sequential":
        figures = sequential(vmfb, count)
    elif mode == "cycles":
        figures = cycles(vmfb, count)
    else:
        figures = compiles(count)
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
