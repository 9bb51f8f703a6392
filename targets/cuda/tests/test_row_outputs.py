"""Row programs with a further output: a pre-norm block's residual sum, which the norm and the next
residual add both read, is computed in the norm's row program and stored as its second result, so it
is no longer an IREE dispatch of its own. The outlined module (IREE's body of each function, without a
GPU) matches eager, and the kernel's arithmetic matches PyTorch in Triton's interpreter."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

from kiln.compiler import CompileOptions, run_pipeline, run_until, spec_from_module


class PreNormBlocks(nn.Module):
    """Two pre-norm residual blocks, as Llama and ViT stack them: h = x + f(norm(x)), each sum read by the
    next norm and the next residual add."""

    def __init__(self) -> None:
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(64) for _ in range(3))
        self.linears = nn.ModuleList(nn.Linear(64, 64) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, linear in zip(self.norms, self.linears, strict=False):
            x = x + linear(norm(x))
        return self.norms[-1](x)


def test_a_residual_sum_is_a_row_programs_second_result_and_the_module_matches_eager(tmp_path):
    torch.manual_seed(0)
    model = PreNormBlocks().eval()
    spec = spec_from_module(model, (torch.randn(4, 16, 64),))
    run_until(spec, CompileOptions(target="cuda", gpu_arch="sm_90a", dump_dir=tmp_path, print_after_all=True, stop_after="simplified"))
    (outlined,) = tmp_path.glob("*.after-outline-row-programs.mlir")
    text = outlined.read_text()
    two_results = re.findall(r"%\S+:2 = call @kiln_rows_\d+", text)
    assert len(two_results) == 1, text  # the first sum's norm; the last sum is read by the final norm alone
    assert "torch.aten.add.Tensor" not in text.split("func.func private")[0]  # no residual add left to IREE
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    shutil.copy(outlined, cpu / "03-simplified.mlir")
    # IREE's own torch input takes the calls (the cuda room hands off torch IR too)
    compiled = run_pipeline(None, CompileOptions(start_from=cpu / "03-simplified.mlir", handoff="torch")).compiled
    x = torch.randn(4, 16, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


def test_the_row_kernel_stores_a_further_output_in_tritons_interpreter():
    script = Path(__file__).with_name("rows_interpreted.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert "residual sum equal" in result.stdout
