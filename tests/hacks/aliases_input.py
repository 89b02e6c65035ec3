# expect: hack_detected output_aliases_input
# Returns a view of an input tensor (writing the result into it).
import torch
import torch.nn as nn


def spmv(rowptr, col, val, x):
    prod = val.double() * x.double()[col.long()]
    c = torch.cat([prod.new_zeros(1), prod.cumsum(0)])
    return (c[rowptr[1:].long()] - c[rowptr[:-1].long()]).float()


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x):
        y = spmv(rowptr, col, val, x)
        x.copy_(y)
        return x
