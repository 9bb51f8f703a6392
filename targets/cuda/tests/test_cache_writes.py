"""--generate's KV-cache writes on Hopper: outline-cache-writes recognizes compiler/generation.py's
select over the cache in prefill and decode, and kiln_cache_write writes the new tokens' slots in place
(the dispatch's result tied to the cache, which IREE's stream phase updates where it lives). The
kernel's arithmetic is checked against `_written` in Triton's interpreter; the GPU generation tests
(tests/runtime/test_generation_gpu.py) run it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from kiln.compiler.driver import compile_file
from kiln.compiler.model_file import GenerationOptions, ModelSource
from kiln.compiler.options import CompileOptions

TINY = Path(__file__).resolve().parents[3] / "examples" / "llama" / "tiny_generate.py"


def test_the_cache_write_kernel_matches_the_select_in_tritons_interpreter():
    script = Path(__file__).with_name("cache_write_interpreted.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert result.stdout.count("max abs error") == 5


def test_prefill_and_decode_write_the_cache_in_place(tmp_path):
    compiled = compile_file(ModelSource(TINY, generation=GenerationOptions(64)), CompileOptions(target="cuda", gpu_arch="sm_90a", dump_dir=tmp_path), tmp_path / "tiny.vmfb")
    records = compiled.compilation.compiled.manifest.kernels
    writes = [record for record in records if record["contraction"].startswith("kv")]
    assert {record["code"] for record in writes} == {"kiln"}, records
    assert sorted(record["calls"] for record in writes) == [4, 4]  # prefill's and decode's: keys and values of 2 layers
    (stream,) = tmp_path.glob("*-vmfb-*-stream.mlir")
    dispatches = re.findall(r"stream\.cmd\.dispatch @kiln_cache_write_\d+_exe::@\w+ \{\n(?:.*\n){3}", stream.read_text())  # and its 3 bindings
    assert len(dispatches) == 16, stream  # 4 a function, in its async and its $out variant
    assert all(re.search(r"\brw %\w+\[.*\] : !stream\.resource<variable>", dispatch) for dispatch in dispatches), dispatches
