import torch


class Branchy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # a Python branch on a tensor's value: torch.export cannot capture it
            return x * 2
        return x - 1


model = Branchy()
example_inputs = (torch.randn(4),)
