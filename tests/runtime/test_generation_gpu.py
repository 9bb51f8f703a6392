"""`--generate` artifacts on CUDA: prefill, each decode step and whole generations against eager PyTorch.

tests/test_generation.py checks the same on the CPU in every run. Here the artifacts run on a GPU, and
each check names the first function and step that goes wrong, so a failure on the device machine says
where to look. The models are tiny Llamas (f32, so greedy ids must equal eager's), with kiln's kernels,
without them, and without kiln's run-time index checks either; and with `--quantize` int8 and int4
weights on kiln's quantized GEMV, against the same quantized model in eager (whose f32 dequantized
weights are the kernel's).

A GPU machine without the compiler runs them from artifacts compiled here, with the eager reference
beside them:

    # here
    python tests/runtime/test_generation_gpu.py -o .device-carry/generation-gpu --gpu-arch sm_90
    # there, from the repository root, with kiln.runtime importable (benchmarks/README.md says how;
    # -P keeps the checkout's bare kiln/ folder from shadowing the installed package)
    KILN_GENERATION_ARTIFACTS=.device-carry/generation-gpu python3 -P -m pytest tests/runtime/test_generation_gpu.py \
        --confcutdir tests/runtime -p no:cacheprovider -v

Where the compiler is installed and a GPU visible, the fixture compiles them itself.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch
from visible_devices import gpu

import kiln
from kiln.runtime.generation import prefill

CARRIED = "KILN_GENERATION_ARTIFACTS"
LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama"
VOCAB = 256
MAX_SEQ_LEN = 64
PROMPT = 9
NEW = 24
# kiln's kernels on; off; off and without kiln's run-time index checks (their asserts read a flag back
# to the host in the middle of a call: decode has four, where the H200 run failed)
# kiln's kernels with the Linear layers' weights quantized (--quantize)
QUANTIZED = {"kernels-int8": "int8", "kernels-int4": "int4-g32"}
VARIANTS = ("kernels", "iree", "iree-unchecked", *QUANTIZED)


def reference(quantize: str | None = None) -> dict[str, torch.Tensor]:
    """The tiny Llama's prompt, and eager f32's logits at each step and greedy ids."""
    sys.path.insert(0, str(LLAMA))
    from llama import build_causal_lm

    from kiln.compiler.quantize import Scheme, quantize_module

    torch.manual_seed(0)
    model = build_causal_lm("tiny", VOCAB)
    if quantize is not None:
        quantize_module(model, Scheme.parse(quantize))
    ids = torch.randint(0, VOCAB, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    sequence = model.generate(ids, max_new_tokens=NEW, do_sample=False)
    with torch.no_grad():
        logits = torch.stack([model(sequence[:, : PROMPT + step]).logits[0, -1] for step in range(NEW)])
    return {"ids": ids, "sequence": sequence, "logits": logits}


def compile_artifacts(out: Path, gpu_arch: str) -> None:
    from kiln.compiler.driver import compile_file
    from kiln.compiler.model_file import GenerationOptions, ModelSource
    from kiln.compiler.options import CompileOptions

    out.mkdir(parents=True, exist_ok=True)
    model_file = out / "tiny.py"
    model_file.write_text(
        f"import sys, torch\nsys.path.insert(0, {str(LLAMA)!r})\nfrom llama import build_causal_lm, prompt\n"
        f"torch.manual_seed(0)\nmodel = build_causal_lm('tiny', {VOCAB})\nexample_inputs = prompt('tiny', {VOCAB})\n"
    )
    for variant in VARIANTS:
        unchecked = ("check-index-inputs",) if variant.endswith("unchecked") else ()
        options = CompileOptions(target="cuda", gpu_arch=gpu_arch, kernels="off" if variant.startswith("iree") else "on", disable_passes=unchecked)
        source = ModelSource(model_file, generation=GenerationOptions(MAX_SEQ_LEN), quantize=QUANTIZED.get(variant))
        compile_file(source, options, out / f"{variant}.vmfb")
    for quantize in (None, *QUANTIZED.values()):
        torch.save(reference(quantize), out / _reference_file(quantize))


def _reference_file(quantize: str | None) -> str:
    return f"reference-{quantize}.pt" if quantize else "reference.pt"


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get(CARRIED):
        return Path(os.environ[CARRIED])
    if importlib.util.find_spec("torch_mlir") is None:
        pytest.skip(f"no compiler here and no {CARRIED}")
    out = tmp_path_factory.mktemp("generation-gpu")
    compile_artifacts(out, "sm_80")
    return out


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_each_step_is_eager(artifacts: Path, variant: str) -> None:
    expected = torch.load(artifacts / _reference_file(QUANTIZED.get(variant)))
    module = kiln.load(artifacts / f"{variant}.vmfb", device="cuda")
    ids = expected["ids"].cuda()
    step = "prefill"
    try:
        token, logits, position = prefill(module, ids)
        torch.cuda.synchronize()
        for index in range(NEW):
            step = "prefill" if index == 0 else f"decode {index}"
            torch.testing.assert_close(logits[0].cpu(), expected["logits"][index], rtol=1e-3, atol=1e-4)
            assert int(token) == int(expected["sequence"][0, PROMPT + index]), step
            assert int(position) == PROMPT + index, step
            token, logits, position = module.decode(token, position)
            torch.cuda.synchronize()
    except Exception as exc:
        raise AssertionError(f"{variant}: {step} went wrong: {exc}") from exc


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_generate_is_transformers(artifacts: Path, variant: str) -> None:
    expected = torch.load(artifacts / _reference_file(QUANTIZED.get(variant)))
    module = kiln.load(artifacts / f"{variant}.vmfb", device="cuda")
    for _ in range(2):  # a second generation over the first one's cache
        assert torch.equal(module.generate(expected["ids"].cuda(), NEW).cpu(), expected["sequence"])


def main() -> None:
    parser = argparse.ArgumentParser(description="Compile the tiny --generate artifacts for cuda, with their reference, to carry.")
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--gpu-arch", default="sm_90")
    arguments = parser.parse_args()
    compile_artifacts(arguments.out, arguments.gpu_arch)
    print(f"wrote {arguments.out}/; there: {CARRIED}={arguments.out} python3 -P -m pytest tests/runtime/test_generation_gpu.py --confcutdir tests/runtime")


if __name__ == "__main__":
    main()
