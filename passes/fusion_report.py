"""fuse-elementwise's report: which ops went into each fused chain, and the graph before and after.

Written beside the stage's dump: `<NN>-<stage>.fusion-report.md`, and `.fusion-before.dot` /
`.fusion-after.dot`, each rendered to `.svg` when Graphviz's `dot` is on PATH and the graph has at
most MAX_SVG_NODES nodes (else left as `.dot`: nothing here needs Graphviz).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .pass_api import PassRun

# Graphviz lays out a few hundred nodes in seconds, a thousand in minutes: larger graphs stay .dot.
MAX_SVG_NODES = 300


@dataclass(frozen=True)
class Graph:
    """One function's data flow: its linalg and tensor ops as nodes, SSA uses as edges."""

    nodes: dict[str, str]  # node id -> label
    edges: list[tuple[str, str]]
    linalg_ops: int


def write_fusion_report(pass_run: PassRun, chains: list[list[str]], before: list[Graph], after: list[Graph]) -> None:
    if pass_run.side_files is None:
        return
    stem = pass_run.side_files.name
    pass_run.write("fusion-report.md", fusion_report(stem, chains, before, after))
    for name, graphs in (("before", before), ("after", after)):
        dot = pass_run.write(f"fusion-{name}.dot", to_dot(graphs, f"{name} {pass_run.name}"))
        if dot is not None:
            render_svg(dot, sum(len(graph.nodes) for graph in graphs))


def fusion_report(stem: str, chains: list[list[str]], before: list[Graph], after: list[Graph]) -> str:
    ops_before = sum(graph.linalg_ops for graph in before)
    ops_after = sum(graph.linalg_ops for graph in after)
    lines = [
        "# Fusion report",
        "",
        f"linalg ops: {ops_before} before fusion, {ops_after} after; {len(chains)} fused chain(s).",
        "",
        f"Ops are numbered as in `{stem}.fusion-before.dot`; `{stem}.fusion-after.dot` shows the result.",
        "IREE's dispatches are the `flow.dispatch` ops of the `*-vmfb-*-flow.mlir` dump;",
        "`python benchmarks/passes_effect.py MODEL.py` counts them with kiln's passes on and off.",
        "",
    ]
    if chains:
        lines += ["| chain | ops fused into one |", "|---|---|"]
        ordered = [sorted(chain, key=label_number) for chain in chains]
        for index, chain in enumerate(sorted(ordered, key=lambda chain: label_number(chain[0])), start=1):
            lines.append(f"| {index} | {', '.join(chain)} |")
    else:
        lines.append("No elementwise chains to fuse.")
    return "\n".join(lines) + "\n"


def to_dot(graphs: list[Graph], title: str) -> str:
    lines = [f'digraph "{title}" {{', "  node [shape=box, fontname=monospace];"]
    for index, graph in enumerate(graphs):
        lines.append(f"  subgraph cluster_{index} {{")
        for node, label in graph.nodes.items():
            shape = ", shape=ellipse" if node.startswith("in") or node == "out" else ""
            lines.append(f'    f{index}_{node} [label="{_escape(label)}"{shape}];')
        lines += [f"    f{index}_{source} -> f{index}_{target};" for source, target in graph.edges]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(dot: Path, nodes: int) -> Path | None:
    """`dot` rendered to an .svg beside it; None where Graphviz is missing, fails or would be slow."""
    executable = shutil.which("dot")
    if executable is None or nodes > MAX_SVG_NODES:
        return None
    svg = dot.with_suffix(".svg")
    try:
        result = subprocess.run([executable, "-Tsvg", str(dot), "-o", str(svg)], capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        return None
    return svg if result.returncode == 0 else None


def label_number(label: str) -> int:
    """3 for "#3 sin": the op's number in the graph before fusion."""
    match = re.match(r"#(\d+)", label)
    return int(match.group(1)) if match else 0


def _escape(label: str) -> str:
    return label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
