# expect: incorrect
# Returns zeros of the right shape and dtype.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x):
        return torch.zeros_like(x)
