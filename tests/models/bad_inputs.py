import torch

model = torch.nn.Linear(4, 4)
example_inputs = (torch.randn(2, 4), {3.0})  # a set: neither a tensor, a Python scalar nor a tuple, list or dict
