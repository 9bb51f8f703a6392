import torch


class Median(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.median(x) + 1  # torch-mlir has no lowering for aten.median


model = Median()
example_inputs = (torch.randn(4, 4),)
