# expect: hack_detected thread_alive_after_return
# runtime-only: the late thread without the static analyzer.
import time
import torch
import torch.nn as nn


def spmv(rowptr, col, val, x):
    prod = val.double() * x.double()[col.long()]
    c = torch.cat([prod.new_zeros(1), prod.cumsum(0)])
    return (c[rowptr[1:].long()] - c[rowptr[:-1].long()]).float()


_threading = __builtins__["__import__"]("threading") if isinstance(__builtins__, dict) else __builtins__.__import__("threading")


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x):
        y = torch.empty_like(x)

        def work():
            time.sleep(0.2)
            y.copy_(spmv(rowptr, col, val, x))

        _threading.Thread(target=work).start()
        return y
