# expect: incorrect
# Writes only the first half of the output.
import torch
import torch.nn as nn


def spmv(rowptr, col, val, x):
    prod = val.double() * x.double()[col.long()]
    c = torch.cat([prod.new_zeros(1), prod.cumsum(0)])
    return (c[rowptr[1:].long()] - c[rowptr[:-1].long()]).float()


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x):
        y = torch.empty_like(x)
        half = x.numel() // 2
        y[:half] = spmv(rowptr, col, val, x)[:half]
        return y
