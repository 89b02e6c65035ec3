# expect: incorrect
# Silently computes in bfloat16, far outside the tolerance.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x):
        prod = val.bfloat16() * x.bfloat16()[col.long()]
        c = torch.cat([prod.new_zeros(1), prod.cumsum(0)])
        return (c[rowptr[1:].long()] - c[rowptr[:-1].long()]).float()
