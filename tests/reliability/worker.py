"""A worker process for the reliability suite: loads and calls artifacts, one case per line of stdin.

Each line is a JSON case: {"vmfb": path, "inputs": [.npy paths], "reference": [.npy paths],
"options": {kiln.load keywords}}. The worker loads the artifact, calls it on the inputs and
answers one JSON line: {"kind": "same" | "wrong" | "error" | "other", "detail": ...}. A crash or a
hang is seen by the parent (harness.Worker) as the process dying or going silent.
"""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import torch

import kiln


def run(case: dict) -> dict:
    try:
        module = kiln.load(case["vmfb"], **case.get("options", {}))
        inputs = [torch.from_numpy(np.load(path)) for path in case["inputs"]]
        results = module(*inputs)
    except kiln.KilnError as error:
        return {"kind": "error", "detail": str(error)}
    except Exception as error:
        return {"kind": "other", "detail": f"{type(error).__name__}: {error}"}
    results = results if isinstance(results, tuple) else (results,)
    references = [np.load(path) for path in case["reference"]]
    if len(results) != len(references):
        return {"kind": "wrong", "detail": f"{len(results)} results, expected {len(references)}"}
    for index, (result, reference) in enumerate(zip(results, references, strict=True)):
        array = result.numpy()
        if array.dtype != reference.dtype or array.shape != reference.shape:
            return {"kind": "wrong", "detail": f"result {index}: {array.dtype}{list(array.shape)}"}
        if array.tobytes() != reference.tobytes():
            return {"kind": "wrong", "detail": f"result {index}: values differ"}
    return {"kind": "same", "detail": ""}


def main() -> None:
    warnings.simplefilter("ignore")  # an unchecked (old-format) artifact warns; the parent knows
    print(json.dumps({"kind": "ready"}), flush=True)
    for line in sys.stdin:
        print(json.dumps(run(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
