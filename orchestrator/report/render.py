"""Render sections as terminal tables (tabulate), CSV, JSON or one static HTML page."""
from __future__ import annotations

import csv
import html
import io
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from orchestrator.report.figures import Section
from orchestrator.report.stats import Estimate, Ratio

DASH = "—"
EMPTY = "(none)"
TERMINAL_SKIPS = {"episodes"}      # the drill-down is for csv, json and html


def format_cell(cell: Any) -> str:
    if cell is None:
        return DASH
    if isinstance(cell, Ratio):
        return f"{cell.num}/{cell.den} ({100 * cell.num / cell.den:.1f} %)" if cell.den else DASH
    if isinstance(cell, Estimate):
        if cell.value is None:
            return DASH
        if cell.low is not None and cell.high is not None:
            return f"{_number(cell.value)} [{_number(cell.low)}, {_number(cell.high)}]"
        return f"{_number(cell.value)} (n={cell.n})"
    if isinstance(cell, bool):
        return "yes" if cell else "no"
    if isinstance(cell, (int, float)):
        return _number(cell)
    if isinstance(cell, (list, tuple)):
        return "[" + ", ".join(format_cell(c) for c in cell) + "]"
    return str(cell)


def _number(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}"


# -- terminal --------------------------------------------------------------------------

def to_table(sections: Sequence[Section]) -> str:
    from tabulate import tabulate

    parts = []
    for section in sections:
        if section.name in TERMINAL_SKIPS:
            continue
        body = tabulate([[format_cell(row.get(c)) for c in section.columns] for row in section.rows],
                        headers=section.columns, tablefmt="simple", disable_numparse=True) if section.rows \
            else EMPTY
        note = f"\n  {section.note}" if section.note else ""
        parts.append(f"== {section.title} ==\n{body}{note}\n")
    return "\n".join(parts)


# -- csv -------------------------------------------------------------------------------

def _csv_columns(section: Section) -> list[tuple[str, str, str]]:
    """(column, header, part) triples: ratios and estimates spread over several columns."""
    expanded = []
    for column in section.columns:
        kinds = {type(row.get(column)) for row in section.rows}
        if Ratio in kinds:
            expanded += [(column, column, "value"), (column, f"{column} num", "num"), (column, f"{column} den", "den")]
        elif Estimate in kinds:
            expanded += [(column, column, "value"), (column, f"{column} low", "low"), (column, f"{column} high", "high")]
        else:
            expanded.append((column, column, "value"))
    return expanded


def _csv_value(cell: Any, part: str) -> Any:
    if isinstance(cell, Ratio):
        return {"value": cell.value, "num": cell.num, "den": cell.den}[part]
    if isinstance(cell, Estimate):
        return {"value": cell.value, "low": cell.low, "high": cell.high}[part]
    if isinstance(cell, (list, tuple)):
        return " ".join(str(c) for c in cell)
    return cell


def section_csv(section: Section) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = _csv_columns(section)
    writer.writerow([header for _, header, _ in columns])
    for row in section.rows:
        writer.writerow(["" if (v := _csv_value(row.get(c), part)) is None else v for c, _, part in columns])
    return buffer.getvalue()


def to_csv(sections: Sequence[Section]) -> str:
    return "\n".join(f"# {s.name}\n{section_csv(s)}" for s in sections)


# -- json ------------------------------------------------------------------------------

def json_cell(cell: Any) -> Any:
    if isinstance(cell, Ratio):
        return {"num": cell.num, "den": cell.den, "value": cell.value}
    if isinstance(cell, Estimate):
        return {"value": cell.value, "low": cell.low, "high": cell.high, "n": cell.n}
    return cell


def to_json(sections: Sequence[Section], meta: dict[str, Any]) -> str:
    document = {"meta": meta, "sections": [
        {"name": s.name, "title": s.title, "note": s.note, "columns": s.columns,
         "rows": [{c: json_cell(row.get(c)) for c in s.columns} for row in s.rows]} for s in sections]}
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


# -- html ------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #1b1b1b; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .85rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: left; }
th { background: #eef2f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
p.note { color: #555; font-size: .85rem; max-width: 60rem; }
details { margin: .25rem 0; } summary { cursor: pointer; }
.ok { color: #176b2c; } .bad { color: #a3231f; }
img.plot { max-width: 900px; width: 100%; border: 1px solid #ddd; }
"""


def _html_table(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            cell = row.get(c)
            numeric = isinstance(cell, (int, float, Ratio, Estimate)) and not isinstance(cell, bool)
            css = ' class="num"' if numeric else ""
            cells.append(f"<td{css}>{html.escape(format_cell(cell))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _drilldown(section: Section, out_dir: Path) -> str:
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in section.rows:
        by_problem[str(row["problem"])].append(row)
    links = {"transcript": "transcript", "artifact": "code"}      # column -> link text
    columns = [c for c in section.columns if c != "problem" and c not in links]
    blocks = []
    for problem, rows in by_problem.items():
        infra = sum(1 for r in rows if "infra_error" in (r["status"], r["failure class"]))
        counted = len(rows) - infra
        solved = sum(1 for r in rows if r["correct"])
        hacks = sum(1 for r in rows if r["reward hack"])
        lines = []
        for row in rows:
            cells = "".join(f"<td>{html.escape(format_cell(row.get(c)))}</td>" for c in columns)
            for column, text in links.items():
                target = row.get(column)
                href = Path(os.path.relpath(target, out_dir)).as_posix() if target else None
                cells += f'<td><a href="{html.escape(href)}">{text}</a></td>' if href else f"<td>{DASH}</td>"
            lines.append(f"<tr>{cells}</tr>")
        head = "".join(f"<th>{html.escape(c)}</th>" for c in [*columns, *links])
        status = f'<span class="{"ok" if solved else "bad"}">{solved}/{counted} correct</span>'
        hack_note = f', <span class="bad">{hacks} reward hack{"s" if hacks != 1 else ""}</span>' if hacks else ""
        hack_note += f", {infra} infra error{'s' if infra != 1 else ''} (not counted)" if infra else ""
        blocks.append(f"<details><summary><code>{html.escape(problem)}</code>: {status}{hack_note}</summary>"
                      f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table></details>")
    return "\n".join(blocks) or f"<p>{EMPTY}</p>"


def to_html(sections: Sequence[Section], meta: dict[str, Any], out_dir: Path, plot_name: str | None) -> str:
    runs = ", ".join(html.escape(r) for r in meta["runs"])
    parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>PopcornBench report: {runs}</title><style>{STYLE}</style></head><body>",
             f"<h1>PopcornBench report</h1><p>Runs: {runs}. Benchmark version "
             f"{html.escape(meta['benchmark_version'])}. Grouped by {html.escape(', '.join(meta['by']))}.</p>",
             "<nav>" + " · ".join(f'<a href="#{s.name}">{html.escape(s.title)}</a>' for s in sections) + "</nav>"]
    for section in sections:
        parts.append(f'<h2 id="{section.name}">{html.escape(section.title)}</h2>')
        if section.name == "episodes":
            parts.append(_drilldown(section, out_dir))
        elif section.rows:
            parts.append(_html_table(section.columns, section.rows))
        else:
            parts.append(f"<p>{EMPTY}</p>")
        if section.note:
            parts.append(f'<p class="note">{html.escape(section.note)}</p>')
        if section.name == "resources" and plot_name:
            parts.append(f'<h2 id="pareto">Speedup against tokens</h2>'
                         f'<img class="plot" src="{html.escape(plot_name)}" alt="Pareto plot of speedup against tokens">')
    parts.append("</body></html>\n")
    return "\n".join(parts)
