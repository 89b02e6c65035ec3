"""All configuration in one place: environment variables (POPCORN_*) and CLI flags.

Precedence: CLI flag > environment variable > default. `Settings.from_args` applies
the flags of any subcommand whose argparse `dest` matches a field. Nothing reads
os.environ at import time; secrets (API keys) are named by variable and read only
where they are used, and never enter a sandbox.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="POPCORN_", extra="ignore")

    # data
    problems_dir: Path = Field(REPO_ROOT / "problems", description="problem folders")
    translation_dir: Path = Field(REPO_ROOT / "translation", description="translation task folders")
    schemas_dir: Path = Field(REPO_ROOT / "schemas", description="JSON schemas")
    results_dir: Path = Field(REPO_ROOT / "results", description="where runs are written")
    cache_dir: Path = Field(REPO_ROOT / ".cache", description="downloads, builds, measured ceilings")

    # scoring
    device: Literal["auto", "cpu", "cuda"] = "auto"
    stress: int = Field(8, ge=0, description="hidden stress shapes per evaluation")
    seed: int | None = Field(None, description="stress seed; default: os.urandom (secret)")
    trials: int = Field(3, ge=3, description="fresh-input correctness trials at the disclosed shape")
    loaded_trials: int = Field(2, ge=0, description="GPU: more correctness trials with a thread of the judge loading "
                               "the GPU (races that show only in company; runner/gpuload.py); none on a CPU")
    loaded_calls: int = Field(4, ge=1, description="calls per loaded trial, back to back on one input set, each "
                              "output checked (a race is a chance per call)")
    timing_iters: int = Field(50, ge=1, description="timed iterations on a GPU (>= 30 recommended)")
    timing_iters_cpu: int = Field(5, ge=1, description="timed iterations on a CPU")
    timing_budget_ms: float = Field(100.0, ge=0, description="GPU: kernels too short for timing_iters to add up "
                                    "to this many milliseconds get more iterations (0: always timing_iters)")
    timing_iters_max: int = Field(1000, ge=1, description="most timed iterations the budget may ask for")
    timing_calls_per_region: int = Field(32, ge=1, description="GPU: most calls back to back in one timed region "
                                         "when a call is short (1: one call per region, as before 2026-11-30)")
    timing_processes: int = Field(2, ge=1, description="translation tasks: processes (rank groups) each side is "
                                  "timed in, one per round in turn; the interval resamples them first")
    timing_warmup: int = Field(3, ge=0)
    timing_input_sets: int = Field(4, ge=1, description="distinct input sets rotated while timing")
    trial_timeout_s: float | None = Field(None, description="override the manifest's per-trial limit")
    judge_timeout_s: float | None = Field(None, gt=0, description="override the whole evaluation's limit "
                                          "(default: the manifest's total_s + 60 s, x3 on a CPU)")
    counters: bool = Field(True, description="collect ncu counters of a passing kernel on a GPU (rule 7)")
    counters_overlap: bool = Field(True, description="GPU, local sandbox: ncu sessions of concurrent evaluations "
                                   "start together and only their profiled ranges queue for the host's profiler "
                                   "lock (the H200's driver allows it: scripts/gpu/ncu_overlap_probe.py; a refused "
                                   "session is run again alone)")
    counters_max_launches: int | None = Field(1, ge=1, description="GPU: ncu profiles at most this many launches of "
                                              "each launch configuration of the candidate's forward (a loop's "
                                              "repeats are sampled; every distinct kernel is seen; None: all)")
    world_size: int | None = Field(None, ge=2, description="ranks of a collectives problem (default: its manifest's)")

    # sandboxes
    sandbox: Literal["auto", "local", "docker"] = "auto"
    sandbox_memory_gb: float = Field(32.0, description="host memory limit of a sandbox (GPU memory is not limited)")
    sandbox_pids: int = 512
    sandbox_cpus: float = Field(4.0, gt=0, description="CPUs of a sandbox: the docker CPU quota, and the thread count "
                                                        "of torch/OpenMP inside every backend (many evaluations "
                                                        "share a host; unbounded thread pools thrash it)")
    images_lock: Path | None = None

    # agent
    model: str = "oracle"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    harness: Literal["st", "mt-default", "mt-all"] = "st"
    track: Literal["subdomain", "popcorn2", "translation-single", "translation-multi"] = "popcorn2"
    attempts: int = Field(1, ge=1)
    max_turns: int = Field(20, ge=1)
    run_id: str | None = None
    gpus: str | None = Field(None, description="comma-separated GPU indices")

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    @classmethod
    def from_args(cls, args: argparse.Namespace | None = None, **overrides: Any) -> "Settings":
        """Environment and defaults first, then every CLI flag that was given."""
        given = {k: v for k, v in vars(args or argparse.Namespace()).items()
                 if v is not None and k in cls.model_fields}
        return cls(**{**given, **overrides})
