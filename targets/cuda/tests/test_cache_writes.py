"""--generate's KV-cache writes on Hopper: outline-cache-writes recognizes compiler/generation.py's
select over the cache in prefill and decode, and kiln_cache_write writes the new tokens' slots in place
(the dispatch's result tied to the cache, which IREE's stream phase updates where it lives); in a decode
step kiln_rotary_cache_write also rotates the layer's queries and keys, and writes its keys and values
in one dispatch. The kernels' arithmetic is checked against `_written` and transformers' rotation in
Triton's interpreter; the GPU generation tests (tests/runtime/test_generation_gpu.py) run them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import torch
from test_matmul_epilogues import _compiled_on_the_cpu, _outlined
from torch import nn

from kiln.compiler.driver import compile_file
from kiln.compiler.generation import _written
from kiln.compiler.model_file import GenerationOptions, ModelSource
from kiln.compiler.options import CompileOptions

TINY = Path(__file__).resolve().parents[3] / "examples" / "llama" / "tiny_generate.py"


def test_the_cache_write_kernel_matches_the_select_in_tritons_interpreter():
    script = Path(__file__).with_name("cache_write_interpreted.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert result.stdout.count("max abs error") == 5


def test_the_rotary_cache_write_kernel_matches_eager_in_tritons_interpreter():
    script = Path(__file__).with_name("rotary_cache_write_interpreted.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert result.stdout.count("of the largest value") == 5


def test_prefill_and_decode_write_the_cache_in_place(tmp_path):
    """Prefill's writes are kiln_cache_write's (keys and values of 2 layers); a decode step's rotations
    and writes are one kiln_rotary_cache_write a layer, its two caches updated where they live."""
    compiled = compile_file(ModelSource(TINY, generation=GenerationOptions(64)), CompileOptions(target="cuda", gpu_arch="sm_90a", dump_dir=tmp_path), tmp_path / "tiny.vmfb")
    records = compiled.compilation.compiled.manifest.kernels
    writes = {record["contraction"].split("x")[0]: record for record in records if record["contraction"].startswith(("kv", "rkv"))}
    assert {record["code"] for record in writes.values()} == {"kiln"}, records
    assert (writes["kv1"]["calls"], writes["rkv1"]["calls"]) == (4, 2)  # prefill's 4 writes; decode's 2 layers
    (stream,) = tmp_path.glob("*-vmfb-*-stream.mlir")
    text = stream.read_text()
    dispatches = re.findall(r"stream\.cmd\.dispatch @kiln_cache_write_\d+_exe::@\w+ \{\n(?:.*\n){3}", text)  # and its 3 bindings
    assert len(dispatches) == 8, stream  # prefill's 4, in its async and its $out variant
    assert all(re.search(r"\brw %\w+\[.*\] : !stream\.resource<variable>", dispatch) for dispatch in dispatches), dispatches
    rotary = re.findall(r"stream\.cmd\.dispatch @kiln_rotary_cache_write_\d+_exe::@\w+ \{\n((?:.*\n){9})", text)  # its 9 bindings
    assert len(rotary) == 4, stream  # decode's 2, in both variants
    assert all(len(re.findall(r"\brw %\w+\[.*\] : !stream\.resource<variable>", bindings)) == 2 for bindings in rotary), rotary


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecodeLayer(nn.Module):
    """A decode step's attention as transformers' Llama and compiler/generation.py write it: queries and
    keys rotated, keys and values written at the step's position, GQA's query heads as rows of a group."""

    def forward(self, q, k, v, cos, sin, key_cache, value_cache, position, mask):
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        keys, values = _written(key_cache, k, position), _written(value_cache, v, position)
        batch, heads, _, dim = q.shape
        rows = q.reshape(batch, keys.shape[1], heads // keys.shape[1], dim)
        return nn.functional.scaled_dot_product_attention(rows, keys, values, attn_mask=mask), keys, values


def test_a_decode_layers_rotations_and_writes_are_one_call_whose_body_matches_eager(tmp_path):
    """In bf16 (the attention stays one op on cuda, and the call is found from it; in f32 a head of 8 is
    decomposed), one rotary_cache_write
    call replaces both rotations and both writes, its description naming the heads. The outlined
    module, each function computing with IREE's code, run on the CPU: the values' cache equals eager's,
    the keys' and the attention within bf16's tolerance (IREE's CPU code rounds the rotation's steps
    its own way; the kernel rounds each as eager does, test_generation_gpu.py runs it)."""
    torch.manual_seed(0)
    batch, q_heads, kv_heads, seq, dim = 2, 4, 2, 16, 8
    angles = torch.rand(batch, 1, 1, dim) * 6.0
    inputs = tuple(
        tensor.bfloat16() if tensor.is_floating_point() else tensor
        for tensor in (
            torch.randn(batch, q_heads, 1, dim), torch.randn(batch, kv_heads, 1, dim), torch.randn(batch, kv_heads, 1, dim),
            angles.cos(), angles.sin(), torch.randn(batch, kv_heads, seq, dim), torch.randn(batch, kv_heads, seq, dim),
            torch.tensor([5]), torch.zeros(batch, 1, 1, seq),
        )
    )  # fmt: skip
    model = DecodeLayer().eval()
    text = _outlined(model, inputs, tmp_path)
    main = text.split("func.func private")[0]
    assert re.search(r"call @kiln_rotary_cache_write_0\(", main) and "kiln_cache_write" not in main, main
    assert "torch.aten.cat" not in main and "torch.aten.where.self" not in main, main
    assert re.search(r'cos_batch = 2 : i64, dim = 8 : i64, dtype = "bf16", kind = "rotary_cache_write", kv_heads = 2 : i64, positions = 1 : i64, q_heads = 4 : i64, seq = 16', text), text
    with torch.no_grad():
        (attention, keys, values), (want_attention, want_keys, want_values) = _compiled_on_the_cpu(tmp_path)(*inputs), model(*inputs)
    assert torch.equal(values, want_values)
    for got, want in ((keys, want_keys), (attention, want_attention)):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
