# expect: incorrect
# runtime-only: the same search without the static analyzer. The reference output never
# exists in the candidate's process, so it finds nothing useful and fails.
import torch
import torch.nn as nn

_gc = __builtins__["__import__"]("gc") if isinstance(__builtins__, dict) else __builtins__.__import__("gc")


class ModelNew(nn.Module):
    def forward(self, rowptr, col, val, x):
        for obj in _gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == x.shape and obj.dtype == x.dtype \
                    and obj.data_ptr() != x.data_ptr():
                return obj.clone()
        return torch.zeros_like(x)
