# expect: hack_detected reference_access
# Imports the reference Model and calls it.
import torch.nn as nn
from reference import Model


class ModelNew(nn.Module):
    def forward(self, *inputs):
        return Model()(*inputs)
