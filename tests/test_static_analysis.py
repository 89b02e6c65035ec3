from pathlib import Path

from orchestrator.scoring.static_analysis import analyze, errors

MANIFEST = {"forbidden_calls": ["torch.segment_reduce", "torch.Tensor.index_add_"],
            "shapes": {"n": {"type": "int", "default": 1000000}}}


def rules(src: str) -> set[str]:
    return {f.rule for f in errors(analyze(src, MANIFEST))}


def test_every_shipped_oracle_is_clean():
    root = Path(__file__).resolve().parent.parent / "problems"
    oracles = sorted(root.glob("*/l*/*/solutions/oracle*.py"))
    assert oracles
    for path in oracles:
        import json
        manifest = json.loads((path.parent.parent / "manifest.json").read_text())
        assert errors(analyze(path.read_text(), manifest)) == [], path


def test_aliases_do_not_hide_forbidden_calls():
    assert "forbidden_call" in rules("import torch as T\nclass ModelNew: pass\nT.segment_reduce(1)")
    assert "forbidden_call" in rules("from torch import segment_reduce as s\nclass ModelNew: pass\ns(1)")
    assert "forbidden_call" in rules("class ModelNew: pass\nx.index_add_(0, i, v)")


def test_rules_fire_on_their_patterns():
    cases = {
        "reference_access": "from reference import Model\nclass ModelNew: pass",
        "introspection": "import sys\nclass ModelNew: pass\nsys._getframe(1)",
        "io": "class ModelNew: pass\nopen('/tmp/ref.pt')",
        "concurrency": "import threading\nclass ModelNew: pass",
        "monkeypatch": "import time\nclass ModelNew: pass\ntime.perf_counter = lambda: 0",
        "try_except": "class ModelNew:\n  def f(self):\n    try:\n      g()\n    except Exception:\n      return 0",
        "syntax_error": "class ModelNew(:",
        "no_modelnew": "class Model2: pass",
    }
    for rule, src in cases.items():
        assert rule in rules(src), rule


def test_reraising_handler_and_plain_code_are_allowed():
    src = "import torch\nclass ModelNew(torch.nn.Module):\n  def forward(self, x):\n    try:\n      return x * 2\n    except ValueError:\n      raise\n"
    assert rules(src) == set()


def test_hardcoded_shape_is_a_warning():
    found = analyze("class ModelNew: pass\nN = 1000000", MANIFEST)
    assert [f.severity for f in found if f.rule == "hardcoded_shape"] == ["warning"]


def test_setattr_on_self_is_fine_on_modules_is_not():
    assert rules("import torch\nclass ModelNew:\n  def __init__(self):\n    setattr(self, 'w', 1)") == set()
    assert "monkeypatch" in rules("import torch\nclass ModelNew: pass\nsetattr(torch.cuda, 'synchronize', None)")


def test_triton_code_the_gpu_compiler_refuses_is_a_warning():
    source = '''
import torch, triton, triton.language as tl
SCALE = 2.0
NEG = tl.constexpr(-1)
@triton.jit
def kernel(x, BLOCK: tl.constexpr):
    rows = [tl.load(x + i) for i in range(3)]
    tl.store(x, SCALE * NEG + BLOCK)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x * SCALE
'''
    findings = [f for f in analyze(source) if f.rule == "triton_gpu"]
    assert {f.line for f in findings} == {7, 8}  # the comprehension and SCALE inside the kernel
    assert all(f.severity == "warning" for f in findings)
    assert any("SCALE" in f.message for f in findings) and not any("NEG" in f.message for f in findings)
