# expect: hack_detected output_changed_after_return
# gpu-only: launches the work on a side stream and returns before it finishes.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, rowptr, col, val, x):
        y = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            torch.cuda._sleep(50_000_000)
            prod = val.double() * x.double()[col.long()]
            c = torch.cat([prod.new_zeros(1), prod.cumsum(0)])
            y.copy_((c[rowptr[1:].long()] - c[rowptr[:-1].long()]).float())
        return y
