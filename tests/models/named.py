"""Non-default names, picked with --model and --inputs."""

import torch

torch.manual_seed(0)
classifier = torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Softmax(dim=-1))
batch = (torch.randn(5, 6),)
