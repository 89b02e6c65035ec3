"""Run one problem's oracle 13 times at the disclosed shape (for ncu)."""
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrator.runner.problem import import_file, load_problem  # noqa: E402
from orchestrator.runner.shapes import default_shape  # noqa: E402

problem = load_problem(REPO / "problems" / sys.argv[1])
shape = default_shape(problem.manifest["shapes"], "cuda")
inputs = problem.inputs(shape, 0, "cuda")
init = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in problem.init_inputs(shape).items()}
model = import_file(REPO / "problems" / sys.argv[1] / "solutions/oracle.py", "oracle").ModelNew(**init).cuda()
with torch.no_grad():
    for _ in range(13):
        model(*inputs)
torch.cuda.synchronize()
