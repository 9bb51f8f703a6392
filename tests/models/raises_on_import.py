import torch

model = torch.nn.Linear(4, 4)
raise RuntimeError("the weights file is missing")
