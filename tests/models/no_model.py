import torch

encoder = torch.nn.Linear(4, 4)
decoder = torch.nn.Linear(4, 4)


def get_weights():
    return {}


example_inputs = (torch.randn(2, 4),)
