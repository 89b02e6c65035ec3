"""Build recipes and real nvcc builds (compile and link only: no GPU here).

The cheapest calibration task, tr-cutlass-tf32-gemm, is built on both sides: its
A100 side for sm_90 and its H100 side for sm_90a (about 10 s and 30 s on an idle
2-core machine). Candidates build for sm_90a against the declared entry point.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from orchestrator.config import REPO_ROOT
from orchestrator.translation import builds, sources
from orchestrator.translation.catalog import find_task

TASK = "tr-cutlass-tf32-gemm"

NAIVE_CANDIDATE = r"""
// A correct but slow candidate: one thread per output element, fp32 FMA.
__global__ void naive(int m, int n, int k, float alpha, const float* A, const float* B, float beta,
                      const float* C, float* D) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
  if (i >= m || j >= n) return;
  float acc = 0.f;
  for (int p = 0; p < k; ++p) acc += A[i * k + p] * B[j * k + p];
  D[i + j * m] = alpha * acc + beta * C[i + j * m];
}
extern "C" int popcorn_tf32_gemm(int m, int n, int k, float alpha, const float* A, const float* B,
                                 float beta, const float* C, float* D, cudaStream_t stream) {
  naive<<<dim3((m + 127) / 128, n), 128, 0, stream>>>(m, n, k, alpha, A, B, beta, C, D);
  return static_cast<int>(cudaPeekAtLastError());
}
"""


@pytest.fixture(scope="module")
def task_and_roots(cache_dir: Path):
    task = find_task(TASK, REPO_ROOT / "translation")
    return task, sources.prepare(task.manifest, cache_dir)


def _sass_archs(library: Path) -> set[str]:
    """The SM targets named in a library's embedded fatbinary (nvcc writes them as plain text)."""
    return {m.decode() for m in re.findall(rb"sm_\d+a?", library.read_bytes())}


def test_command_targets_each_side(task_and_roots) -> None:
    task, roots = task_and_roots
    out = Path("lib.so")
    a100 = builds.command(task, "a100", roots, task.file("a100.cu"), out, nvcc="nvcc")
    h100 = builds.command(task, "h100", roots, task.file("h100.cu"), out, nvcc="nvcc")
    cand = builds.command(task, "candidate", roots, Path("cand.cu"), out, nvcc="nvcc")
    assert "arch=compute_90,code=sm_90" in a100 and "arch=compute_90a,code=sm_90a" in h100
    assert "arch=compute_90a,code=sm_90a" in cand
    assert cand[cand.index("-include") + 1] == str(task.file("entry.h"))
    assert "-include" not in a100 and "-include" not in h100
    cutlass_include = f"-I{roots['cutlass42'] / 'include'}"
    assert cutlass_include in a100 and cutlass_include in h100 and cutlass_include in cand


def test_both_sides_build_and_export_the_entry_point(task_and_roots, cache_dir: Path) -> None:
    task, roots = task_and_roots
    for side in ("a100", "h100"):
        result = builds.build(task, side, roots, cache_dir)
        assert result.ok and result.library is not None and result.library.is_file()
        symbols = subprocess.run(["nm", "-D", "--defined-only", str(result.library)], capture_output=True,
                                 text=True, check=True).stdout
        assert " T popcorn_tf32_gemm" in symbols
        assert _sass_archs(result.library) == {"sm_90" if side == "a100" else "sm_90a"}
        again = builds.build(task, side, roots, cache_dir)
        assert again.cached and again.library == result.library


def test_candidate_builds_and_a_broken_one_reports_nvcc_errors(task_and_roots, cache_dir: Path,
                                                                tmp_path: Path) -> None:
    task, roots = task_and_roots
    good = tmp_path / "naive.cu"
    good.write_text(NAIVE_CANDIDATE)
    result = builds.build(task, "candidate", roots, tmp_path / "cache", candidate=good)
    assert result.ok, result.log
    assert _sass_archs(result.library) == {"sm_90a"}

    wrong_signature = tmp_path / "wrong.cu"  # int where the header declares float: a conflicting declaration
    wrong_signature.write_text(NAIVE_CANDIDATE.replace("float beta, const float* C, float* D, cudaStream_t",
                                                       "int beta, const float* C, float* D, cudaStream_t"))
    bad = builds.build(task, "candidate", roots, tmp_path / "cache", candidate=wrong_signature)
    assert not bad.ok and bad.library is None
    assert "popcorn_tf32_gemm" in bad.log and "error" in bad.log

    syntax = tmp_path / "syntax.cu"
    syntax.write_text("extern \"C\" int popcorn_tf32_gemm(  // unterminated\n")
    broken = builds.build(task, "candidate", roots, tmp_path / "cache", candidate=syntax)
    assert not broken.ok and "error" in broken.log


def test_a_candidate_build_reads_the_task_and_the_toolchain_and_nothing_of_ours(task_and_roots,
                                                                                tmp_path: Path) -> None:
    """nvcc runs the candidate's preprocessor and assembler: outside its view (buildjail.py), an
    #include or .incbin of any readable file put the file into the compile log the agent sees, or
    into the library. The pinned sources stay readable."""
    task, roots = task_and_roots
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP_SECRET_LINE of another episode\n")
    attempts = {
        "include": f'#include "{secret}"\n',
        "include_checkout": f'#include "{REPO_ROOT / "README.md"}"\n',
        "incbin": f'asm(".section .rodata\\n.incbin \\"{secret}\\"\\n.text");\n',
    }
    for name, line in attempts.items():
        source = tmp_path / f"{name}.cu"
        source.write_text(NAIVE_CANDIDATE + line)
        result = builds.build(task, "candidate", roots, tmp_path / "cache", candidate=source)
        assert not result.ok, name
        assert "TOP_SECRET_LINE" not in result.log and "PopcornBench" not in result.log, result.log[-1500:]
        assert "No such file" in result.log or "can't open" in result.log or "not found" in result.log.lower(), result.log[-1500:]
    pinned = tmp_path / "uses_cutlass.cu"
    pinned.write_text("#include <cutlass/numeric_types.h>\n" + NAIVE_CANDIDATE)
    result = builds.build(task, "candidate", roots, tmp_path / "cache", candidate=pinned)
    assert result.ok, result.log[-1500:]


def test_a_build_view_that_cannot_be_made_is_ours_not_a_compile_error(task_and_roots, tmp_path: Path) -> None:
    from orchestrator.translation import buildjail

    task, roots = task_and_roots
    good = tmp_path / "naive.cu"
    good.write_text(NAIVE_CANDIDATE)
    missing = {**roots, "gone": tmp_path / "no-such-root"}  # a pinned root that vanished from the cache
    with pytest.raises(buildjail.BuildIsolationError, match="could not set up the build's view"):
        builds.build(task, "candidate", missing, tmp_path / "cache", candidate=good)


def test_a_broken_reference_recipe_raises_with_the_log_path(task_and_roots, tmp_path: Path) -> None:
    task, roots = task_and_roots
    manifest = {**task.manifest, "build": {**task.manifest["build"], "flags": ["-DPOPCORN_BROKEN", "--no-such-flag"]}}
    broken = type(task)(task.path, manifest)
    with pytest.raises(builds.BuildError, match=r"the a100 build failed .* see .*failed-a100-"):
        builds.build(broken, "a100", roots, tmp_path)


def test_evaluate_on_a_cpu_compiles_and_reports_compile_errors(task_and_roots, tmp_path: Path) -> None:
    import json

    import jsonschema

    from orchestrator.config import Settings
    from orchestrator.translation.scoring import evaluate

    schema = json.loads((REPO_ROOT / "schemas" / "result.schema.json").read_text())
    settings = Settings(device="cpu")
    good = tmp_path / "naive.cu"
    good.write_text(NAIVE_CANDIDATE)
    compiled = evaluate(TASK, good, settings, mode="compile")
    jsonschema.validate(compiled, schema)
    assert compiled["status"] == "passed" and compiled["stages"]["load"]["status"] == "passed"
    assert compiled["track"] == "translation-single" and compiled["device"]["type"] == "cpu"
    checked = evaluate(TASK, good, settings, mode="check")
    assert checked["failure_class"] == "infra_error" and "CUDA GPU" in checked["failure_detail"]
    broken = tmp_path / "broken.cu"
    broken.write_text(NAIVE_CANDIDATE.replace("return static_cast<int>", "return undefined_name +"))
    failed = evaluate(TASK, broken, settings, mode="compile")
    jsonschema.validate(failed, schema)
    assert failed["failure_class"] == "compile_error" and "undefined_name" in failed["failure_detail"]


def test_the_cuda_ipc_helper_builds_once(cache_dir: Path) -> None:
    first = builds.build_ipc_helper(cache_dir)
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(first)], capture_output=True, text=True,
                             check=True).stdout
    for name in ("popcorn_ipc_alloc", "popcorn_ipc_open", "popcorn_ipc_close", "popcorn_ipc_free"):
        assert f" T {name}" in symbols
    mtime = first.stat().st_mtime_ns
    assert builds.build_ipc_helper(cache_dir) == first and first.stat().st_mtime_ns == mtime


def test_a_candidate_that_includes_or_pastes_the_h100_reference_is_refused(task_and_roots, tmp_path: Path) -> None:
    from orchestrator.translation import integrity

    task, roots = task_and_roots
    assert integrity.reference_leak(task, roots, task.file("a100.cu")) is None  # porting the A100 code is the job
    naive = tmp_path / "naive.cu"
    naive.write_text(NAIVE_CANDIDATE)
    assert integrity.reference_leak(task, roots, naive) is None
    # the H100 adapter includes the human-written H100 example: that is handing back the answer
    leak = integrity.reference_leak(task, roots, task.file("h100.cu"))
    assert leak and leak.startswith("reference_include") and "48_hopper" in leak
    h100_main = roots[task.manifest["h100"]["pin"]] / task.manifest["h100"]["main"]
    pasted = tmp_path / "pasted.cu"
    pasted.write_text(NAIVE_CANDIDATE + h100_main.read_text().replace("int main(", "int upstream_main("))
    leak = integrity.reference_leak(task, roots, pasted)
    assert leak and leak.startswith("reference_pasted")


def test_build_key_follows_our_headers_in_the_task_folder_and_in_named_siblings(tmp_path):
    """A helper header next to the adapter, or a sibling task's header it includes by relative
    path, changes what nvcc produces: editing either must change the cache key (found stale)."""
    from orchestrator.translation.builds import _local_digest
    from orchestrator.translation.catalog import Task

    root = tmp_path / "translation"
    a, b = root / "single" / "tr-a", root / "single" / "tr-b"
    for d in (a, b, root / "common" / "shim"):
        d.mkdir(parents=True)
    (a / "a100.cu").write_text('#include "prep.cuh"\n#include "../tr-b/shared.h"\n')
    (a / "prep.cuh").write_text("// v1\n")
    (a / "task.py").write_text("# not compiled\n")
    (b / "shared.h").write_text("// v1\n")
    (root / "common" / "shim" / "torch.h").write_text("// v1\n")
    task = Task(a, {"build": {"local_includes": ["common/shim"]}})
    keys = [_local_digest(task)]
    for f in (a / "prep.cuh", b / "shared.h", root / "common" / "shim" / "torch.h"):
        f.write_text("// v2\n")
        keys.append(_local_digest(task))
    assert len(set(keys)) == 4
    (a / "task.py").write_text("# edited\n")           # Python glue is not part of the build
    assert _local_digest(task) == keys[-1]


def test_build_key_follows_a_pins_source_fixes(cache_dir: Path) -> None:
    """The same manifest file with and without tr-fa2-bwd's source fix must not share a cached library."""
    import copy

    from orchestrator.translation.catalog import Task

    task = find_task("tr-fa2-bwd", REPO_ROOT / "translation")
    upstream = Task(task.path, copy.deepcopy(task.manifest))
    del upstream.manifest["pins"]["cutlass42"]["fixes"]
    keys = []
    for variant in (task, upstream):
        roots = sources.prepare(variant.manifest, cache_dir)
        cmd = builds.command(variant, "h100", roots, builds.source_for(variant, "h100", None), Path("lib.so"),
                             nvcc="nvcc")
        keys.append(builds.cache_key(variant, "h100", cmd, builds.source_for(variant, "h100", None), roots))
    assert keys[0] != keys[1]
