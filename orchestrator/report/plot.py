"""The Pareto plot: each correct, timed episode's speedup against the tokens it spent."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

from orchestrator.report.outcome import Outcome
from orchestrator.report.stats import pareto_front

HARNESS_COLOURS = {"st": "#1f77b4", "mt-default": "#ff7f0e", "mt-all": "#2ca02c"}


def pareto_plot(outcomes: Sequence[Outcome], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")          # no display: CI, servers
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    points = [o for o in outcomes if not o.infra and o.speedup is not None and o.tokens > 0]
    models = sorted({str(o.key("model")) for o in points})
    markers = dict(zip(models, "osD^vP*X"))
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    series: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in points:
        series[(str(o.key("harness")), str(o.key("model")))].append(o)
    order = list(HARNESS_COLOURS)
    for (harness, model), members in sorted(series.items(), key=lambda item: (
            order.index(item[0][0]) if item[0][0] in order else len(order), item[0])):
        label = harness if len(models) == 1 else f"{model} / {harness}"
        ax.scatter([o.tokens for o in members], [o.speedup or 0.0 for o in members], s=36, alpha=0.8,
                   color=HARNESS_COLOURS.get(harness, "#7f7f7f"), marker=markers.get(model, "o"), label=label)
    front = pareto_front([(float(o.tokens), o.speedup) for o in points if o.speedup is not None])
    if front:
        xs, ys = zip(*front)
        ax.step(xs, ys, where="post", color="#d62728", linewidth=1.5, label="Pareto front")
        ax.set_xscale("log")
        ax.set_yscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}x"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        few_decades = max(xs) / min(xs) < 30       # then the minor ticks are the only labels
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}") if few_decades else NullFormatter())
    else:
        ax.text(0.5, 0.5, "no correct, timed episodes", ha="center", va="center", transform=ax.transAxes)
    ax.axhline(1.0, color="#555", linestyle="--", linewidth=0.8)
    ax.set_xlabel("tokens per episode")
    ax.set_ylabel("speedup (x)")
    ax.set_title("Speedup against tokens (correct final kernels)")
    if points:
        ax.legend(fontsize=8, loc="best")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
