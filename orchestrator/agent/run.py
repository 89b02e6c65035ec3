"""`python -m orchestrator run`: evaluate a model on a track with a harness.

    python -m orchestrator run --track popcorn2 --harness mt-default --model gpt-4o \
        [--base-url URL] [--api-key-env VAR] [--attempts K] [--max-turns N] \
        [--problems GLOB] [--sandbox docker|local|auto] [--gpus LIST] [--run-id ID] [--resume]

Writes results/<run_id>/ (records.RunDir). Exit codes: 0 the run finished (whatever the
scores), 2 bad input (one line, nothing started), 3 the run finished but some episodes
are infra_error (re-run them with --resume).
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from orchestrator.agent.accounting import Limits, load_price_table, price_for
from orchestrator.agent.client import OpenAIChatModel, RetryPolicy
from orchestrator.agent.harness import EpisodeEnv, EpisodeSpec, episode_id
from orchestrator.agent.records import RunDir
from orchestrator.agent.tools import DEFAULT_OUTPUT_LIMIT, HARNESS_TOOLS, Scoring
from orchestrator.errors import UserError
from orchestrator.provenance import git_state

TRACKS = ("subdomain", "popcorn2", "translation-single", "translation-multi")
HARNESSES = tuple(HARNESS_TOOLS)
EXIT_INFRA = 3


def configure(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("--track", default=None, help=f"one of {', '.join(TRACKS)} (default popcorn2)")
    a("--harness", default=None, help=f"one of {', '.join(HARNESSES)} (default st)")
    a("--model", default=None, help="model name at the endpoint, or a built-in agent: oracle, oracle:tools, replay:DIR")
    a("--base-url", dest="base_url", default=None, help="OpenAI-compatible endpoint (default: OPENAI_BASE_URL or api.openai.com)")
    a("--api-key-env", dest="api_key_env", default=None, help="environment variable holding the API key (default OPENAI_API_KEY)")
    a("--attempts", type=int, default=None, help="independent episodes per problem (default 1)")
    a("--max-turns", dest="max_turns", type=int, default=None, help="turn limit of the multi-turn harnesses (default 20)")
    a("--max-tokens", dest="max_tokens", type=int, default=None, help="token limit per episode (prompt + completion)")
    a("--max-wall-s", dest="max_wall_s", type=float, default=None, help="wall-time limit per episode, seconds")
    a("--problems", default=None, help="globs over problem ids, comma-separated, e.g. 'graph/*,robotics/l1/*' (default: the whole track)")
    a("--sandbox", default=None, choices=["auto", "local", "docker"])
    a("--device", default=None, choices=["auto", "cpu", "cuda"])
    a("--gpus", default=None, help="comma-separated GPU indices (default 0 on a GPU host)")
    a("--images-lock", type=Path, default=None,
      help="docker: run exactly the image digests recorded in this lock file (a published set)")
    a("--run-id", dest="run_id", default=None, help="results/<run_id>/ (default: time, model, harness, track)")
    a("--resume", action="store_true", help="continue results/<run_id>/: run only the episodes without a record")
    a("--price-table", dest="price_table", type=Path, default=None, help="JSON: model -> USD per million tokens")
    a("--temperature", type=float, default=None)
    a("--max-completion-tokens", dest="max_completion_tokens", type=int, default=None)
    a("--request-timeout-s", dest="request_timeout_s", type=float, default=None, help="per model call (default 600)")
    a("--retries", type=int, default=None, help="retries of a model call on 429/5xx/timeouts (default 6)")
    a("--backoff-s", dest="backoff_s", type=float, default=None, help="first retry wait, doubling (default 1)")
    a("--tool-timeout-s", dest="tool_timeout_s", type=float, default=None, help="per tool call (default 600)")
    a("--tool-output-limit", dest="tool_output_limit", type=int, default=None,
      help=f"characters of a tool result sent to the model, the rest trimmed with a note (default {DEFAULT_OUTPUT_LIMIT})")
    a("--stress", type=int, default=None, help="hidden stress shapes per scoring (default 8)")
    a("--seed", type=int, default=None, help="run seed for scoring (default: secret, recorded in run.json)")
    a("--loaded-trials", dest="loaded_trials", type=int, default=None,
      help="GPU: correctness trials per scoring with a thread of the judge loading the GPU (default 2; 0: none)")
    a("--loaded-calls", dest="loaded_calls", type=int, default=None,
      help="calls per loaded trial, back to back, each output checked (default 4)")
    a("--parallel", type=int, default=None, help="the same as --max-parallel")
    a("--executor", default="local", choices=["local", "ray"],
      help="local: this machine's GPUs (default); ray: one Ray task per episode on a cluster (docs/executors.md)")
    a("--max-parallel", dest="max_parallel", type=int, default=None,
      help="episodes at a time (local: default one per GPU, more share GPUs; ray: default all the cluster fits)")
    a("--order", default="longest-first", choices=["longest-first", "catalog"],
      help="start order of the episodes. longest-first (default): episodes with no earlier record first, then "
           "by descending median wall time of the same problem, harness and model in earlier runs under the "
           "results directory, so no GPU idles at the end waiting on a long episode started last; catalog: as planned")
    a("--ray-address", dest="ray_address", default=None,
      help="Ray cluster, e.g. 10.0.0.5:6379 (default: a new local Ray instance)")
    a("--quiet", action="store_true", help="no progress bar")


# Options of the agent loop (not scoring settings): flag > run.json (on --resume) > default.
AGENT_DEFAULTS: dict[str, Any] = {
    "max_tokens": None, "max_wall_s": None, "tool_timeout_s": 600.0, "tool_output_limit": DEFAULT_OUTPUT_LIMIT,
    "retries": 6, "backoff_s": 1.0, "request_timeout_s": 600.0, "temperature": None, "max_completion_tokens": None,
}
# Settings a resumed run keeps from run.json unless a flag overrides them (paths may move).
NOT_RESUMED = {"problems_dir", "translation_dir", "schemas_dir", "results_dir", "cache_dir", "images_lock", "run_id"}


def agent_options(args: argparse.Namespace, stored: dict[str, Any]) -> dict[str, Any]:
    return {k: getattr(args, k, None) if getattr(args, k, None) is not None else stored.get(k, default)
            for k, default in AGENT_DEFAULTS.items()}


# ---------------------------------------------------------------- model and endpoint

def _is_loopback(url: str | None) -> bool:
    host = urlparse(url or "").hostname or ""
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def make_agent(model: str, base_url: str | None, api_key_env: str, options: dict[str, Any]) -> Any:
    """The agent behind --model; a missing endpoint or key is one clear line."""
    from orchestrator.agent.builtin import builtin_agent

    agent = builtin_agent(model)
    if agent is not None:
        return agent
    base_url = base_url or os.environ.get("OPENAI_BASE_URL")
    key = os.environ.get(api_key_env)
    if not key:
        if base_url and _is_loopback(base_url):
            key = "EMPTY"  # local servers (vLLM, SGLang) usually take any key
        else:
            where = base_url or "https://api.openai.com/v1 (no --base-url given)"
            raise UserError(f"model {model!r} needs an API key: set ${api_key_env} (or pass --api-key-env VAR) "
                            f"for the endpoint {where}")
    if base_url and not urlparse(base_url).scheme.startswith("http"):
        raise UserError(f"--base-url {base_url!r} is not an http(s) URL")
    policy = RetryPolicy(retries=options["retries"], backoff_s=options["backoff_s"],
                         request_timeout_s=options["request_timeout_s"])
    return OpenAIChatModel(model, base_url=base_url, api_key=key, policy=policy, temperature=options["temperature"],
                           max_completion_tokens=options["max_completion_tokens"])


# ---------------------------------------------------------------- run.json

def versions() -> dict[str, Any]:
    import orchestrator

    out: dict[str, Any] = {"python": platform.python_version(), "orchestrator": orchestrator.__version__,
                           "benchmark": getattr(orchestrator, "BENCHMARK_VERSION", None), **git_state()}
    for name in ("torch", "triton", "openai"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = None
    return out


def default_run_id(model: str, harness: str, track: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-")[:40]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}-{harness}-{track}"


# ---------------------------------------------------------------- planning

def _catalog() -> Any:
    from orchestrator import catalog

    return catalog


def plan(settings: Any, track: str, pattern: str | None, attempts: int) -> list[dict[str, Any]]:
    catalog = _catalog()
    entries = catalog.select(catalog.load_catalog(settings), track=track, pattern=pattern)
    if not entries:
        raise UserError(f"no problem of track {track!r} matches {pattern!r}" if pattern
                        else f"track {track!r} has no problems")
    return [{"episode_id": episode_id(e.id, a), "problem": e.id, "attempt": a}
            for e in entries for a in range(attempts)]


def _resolve_options(args: argparse.Namespace, run_dir: RunDir | None) -> dict[str, Any]:
    """track/harness/model/attempts/problems: flags, else run.json (resume), else defaults."""
    stored = run_dir.read_run()["config"] if run_dir is not None else {}
    defaults = {"track": "popcorn2", "harness": "st", "model": "oracle", "attempts": 1, "problems": None,
                "max_turns": 20}
    out = {}
    for key, default in defaults.items():
        given = getattr(args, key, None)
        if run_dir is not None and given is not None and key in stored and stored[key] != given:
            raise UserError(f"--{key.replace('_', '-')} {given!r} differs from the run being resumed ({stored[key]!r})")
        out[key] = given if given is not None else stored.get(key, default)
    if out["track"] not in TRACKS:
        raise UserError(f"unknown track {out['track']!r} (known: {', '.join(TRACKS)})")
    if out["harness"] not in HARNESSES:
        raise UserError(f"unknown harness {out['harness']!r} (known: {', '.join(HARNESSES)})")
    if out["attempts"] < 1 or out["max_turns"] < 1:
        raise UserError("--attempts and --max-turns must be at least 1")
    return out


def _gpus(settings: Any, device: str) -> list[int]:
    if device != "cuda":
        return []
    if not settings.gpus:
        return [0]
    try:
        return [int(g) for g in str(settings.gpus).split(",") if g.strip()]
    except ValueError as exc:
        raise UserError(f"--gpus {settings.gpus!r} is not a comma-separated list of indices") from exc


def _sweep_leftover_containers(settings: Any) -> None:
    """A run starts by removing containers that a killed orchestrator left behind."""
    if settings.sandbox == "local":
        return
    from orchestrator.sandbox.base import SandboxUnavailable
    from orchestrator.sandbox.commands import prune
    from orchestrator.sandbox.docker import engine_available

    if engine_available():
        try:
            removed = prune(orphans_only=True)
        except SandboxUnavailable:
            return
        if removed:
            print(f"removed {len(removed)} container(s) left by an earlier, killed run", file=sys.stderr)


def sandbox_factory(settings: Any, device: str, gpus: list[int]) -> Callable[[EpisodeSpec], Any]:
    """One sandbox per episode for the tools; the pipeline's spec when it offers one."""
    def factory(spec: EpisodeSpec) -> Any:
        from orchestrator.scoring import pipeline

        return pipeline.create_sandbox(spec.entry, settings, run_id=spec.run_id, episode=spec.episode_id)
    return factory


# ---------------------------------------------------------------- main

def main(args: argparse.Namespace) -> int:
    from orchestrator.config import Settings

    resume = bool(getattr(args, "resume", False))
    if resume and not args.run_id:
        raise UserError("--resume needs --run-id (the run to continue)")
    results_root = Settings.from_args(argparse.Namespace()).results_dir
    run_dir = RunDir(results_root / args.run_id) if args.run_id else None
    if resume and (run_dir is None or not run_dir.exists()):
        raise UserError(f"no run to resume at {run_dir.path if run_dir else '?'}")
    opts = _resolve_options(args, run_dir if resume else None)
    stored_run = run_dir.read_run() if resume and run_dir else {}
    stored_config = stored_run.get("config", {})
    base_url = args.base_url or stored_config.get("base_url")
    api_key_env = args.api_key_env or stored_config.get("api_key_env") or "OPENAI_API_KEY"
    options = agent_options(args, stored_run.get("agent", {}))
    agent = make_agent(opts["model"], base_url, api_key_env, options)
    price = price_for(load_price_table(args.price_table), opts["model"])

    kept = {k: v for k, v in stored_config.items() if k in Settings.model_fields and k not in NOT_RESUMED}
    given = {k: v for k, v in vars(args).items() if v is not None and k in Settings.model_fields}
    overrides = {k: opts[k] for k in ("track", "harness", "model", "attempts", "max_turns")}
    settings = Settings(**{**kept, **given, **overrides, "base_url": base_url, "api_key_env": api_key_env})
    device = settings.resolved_device()
    gpus = _gpus(settings, device)
    if device == "cuda" and settings.sandbox == "local" and getattr(args, "executor", "local") == "local":  # docker images bring their own CUDA torch
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda: torch sees no CUDA GPU on this host (use --device cpu or auto)")
        if any(g >= torch.cuda.device_count() for g in gpus):
            raise UserError(f"--gpus {settings.gpus}: this host has {torch.cuda.device_count()} GPU(s)")

    _sweep_leftover_containers(settings)
    if resume:
        assert run_dir is not None
        info = run_dir.read_run()
        planned = info["planned"]
        run_seed = int(info["run_seed"])
        run_dir.repair()
        moved = run_dir.set_aside_infra()
        info.setdefault("resumed_at", []).append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                  "infra_records_rerun": moved})
        run_dir.write_run(info)
    else:
        planned = plan(settings, opts["track"], opts["problems"], opts["attempts"])
        run_id = args.run_id or default_run_id(opts["model"], opts["harness"], opts["track"])
        run_dir = RunDir(results_root / run_id)
        if run_dir.exists() or run_dir.episodes.exists():
            raise UserError(f"{run_dir.path} exists: pass --resume to continue it, or choose another --run-id")
        run_seed = settings.seed if settings.seed is not None else secrets.randbits(63)
        from orchestrator.agent.prompts import host_device_info

        run_dir.write_run({
            "run_id": run_id, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": sys.argv, "config": {**settings.model_dump(mode="json"), "problems": opts["problems"]},
            "agent": options,
            "versions": versions(), "device": {"type": device, "gpus": gpus, **host_device_info(device, gpus)},
            "run_seed": run_seed, "planned": planned,
        })
    run_id = run_dir.path.name
    done = {r.get("episode_id") for r in run_dir.load_records()}
    todo = [p for p in planned if p["episode_id"] not in done]

    from orchestrator.agent.prompts import host_device_info

    env = EpisodeEnv(settings=settings, run_dir=run_dir, scoring=Scoring.real(), device=device,
                     device_info=host_device_info(device, gpus),
                     limits=Limits(max_turns=opts["max_turns"], max_tokens=options["max_tokens"],
                                   max_wall_s=options["max_wall_s"]),
                     sandbox_factory=sandbox_factory(settings, device, gpus), price=price,
                     output_limit=options["tool_output_limit"], tool_timeout_s=options["tool_timeout_s"])
    from orchestrator.executors import AgentWork, execute, make_executor
    from orchestrator.executors.ray_executor import endpoint_env

    executor = make_executor(getattr(args, "executor", "local"), gpus, getattr(args, "max_parallel", None) or args.parallel,
                             getattr(args, "ray_address", None), env_vars=endpoint_env(api_key_env))
    print(f"run {run_id}: {len(todo)} episode(s) to run, {len(planned) - len(todo)} already recorded "
          f"({opts['model']}, {opts['harness']}, {opts['track']}, {device}, {executor.describe()}) -> {run_dir.path}",
          file=sys.stderr)
    work = AgentWork(env, lambda: make_agent(opts["model"], base_url, api_key_env, options), run_id, run_seed, opts)
    if todo:
        from orchestrator.executors.order import order_episodes

        todo, said = order_episodes(todo, getattr(args, "order", "longest-first"), results_root, opts["harness"],
                                    opts["model"])
        print(said, file=sys.stderr)
    execute(executor, work, todo, run_dir, desc=run_id, quiet=args.quiet)
    records = run_dir.load_records()
    print(summary(records, planned))
    return EXIT_INFRA if any(r.get("status") == "infra_error" for r in records) else 0


def _speedup(record: dict[str, Any]) -> Any:
    verdict = record.get("verdict") or {}
    value = verdict.get("speedup")
    return f"{value:.3g}x" if isinstance(value, (int, float)) else "-"


def summary(records: list[dict[str, Any]], planned: list[dict[str, Any]]) -> str:
    from tabulate import tabulate

    rows = []
    for r in sorted(records, key=lambda r: (r.get("problem", ""), r.get("attempt", 0))):
        verdict = r.get("verdict") or {}
        rows.append([r.get("problem"), r.get("attempt"), r.get("status"),
                     verdict.get("status", "-"), verdict.get("failure_class") or "-", _speedup(r),
                     r.get("turns"), (r.get("tokens") or {}).get("total", 0), f"{r.get('wall_s', 0):.1f}"])
    table = tabulate(rows, headers=["problem", "att", "episode", "verdict", "failure", "speedup", "turns",
                                    "tokens", "wall s"])
    passed = sum(1 for r in records if (r.get("verdict") or {}).get("status") == "passed")
    infra = sum(1 for r in records if r.get("status") == "infra_error")
    tokens = sum((r.get("tokens") or {}).get("total", 0) for r in records)
    costs = [r["cost_usd"] for r in records if isinstance(r.get("cost_usd"), (int, float))]
    foot = (f"\n{len(records)}/{len(planned)} episodes recorded, {passed} passed, {infra} infra_error, "
            f"{tokens} tokens" + (f", ${sum(costs):.4f}" if costs else ""))
    return table + foot
