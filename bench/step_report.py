"""The pretraining-step report: rounds merged, MFU and ratios, the markdown table."""

from __future__ import annotations

import statistics
from typing import Any

from bench.common import fmt
from bench.step_workload import PEERS, PRECISIONS


def merge_rounds(previous: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """One variant's result over rounds: timed steps pooled, per-round medians kept."""
    if previous is None:
        merged = dict(new)
        merged["round_medians_s"] = [new.get("median_s")]
        return merged
    merged = dict(previous)
    merged["round_medians_s"] = [*previous["round_medians_s"], new.get("median_s")]
    if "times_s" not in new:  # a failed round: keep what the others measured
        merged.setdefault("round_errors", []).append(new.get("error"))
        return merged
    if "times_s" not in previous:
        merged = {**new, "round_medians_s": merged["round_medians_s"]}
        merged["round_errors"] = previous.get("round_errors", []) + [previous.get("error")]
        return merged
    times = previous["times_s"] + new["times_s"]
    others = [
        x
        for x in (previous["other_processes_cpu_fraction"], new["other_processes_cpu_fraction"])
        if x is not None
    ]
    merged.update(
        times_s=times,
        median_s=statistics.median(times),
        min_s=min(times),
        max_s=max(times),
        repeats=len(times),
        other_processes_cpu_fraction=max(others) if others else None,
    )
    return merged


def summarize(report: dict[str, Any]) -> None:
    """Adds MFU, tokens/s and ratios (peer median / ours median) in place."""
    shape = report["shape"]
    flops = report["flops_per_step"]
    peaks = report.get("peak", {})
    for precision, variants in report["results"].items():
        peak = peaks.get(f"peak_{'fp32' if precision == 'float32' else 'bf16'}")
        for r in variants.values():
            if "median_s" not in r:
                continue
            r["tokens_per_s"] = round(shape["batch"] * shape["seq"] / r["median_s"], 1)
            r["achieved_gflops"] = round(flops / r["median_s"] / 1e9, 1)
            r["mfu"] = round(flops / r["median_s"] / (peak * 1e9), 4) if peak else None
        ours = variants.get("ours", {}).get("median_s")
        if not ours:
            continue
        ratios = {
            v: round(r["median_s"] / ours, 3)
            for v, r in variants.items()
            if v != "ours" and "median_s" in r
        }
        peer_ratios = {v: x for v, x in ratios.items() if v in PEERS}
        best = min(peer_ratios, key=peer_ratios.get) if peer_ratios else None
        ours_min = variants["ours"]["min_s"]
        # Fastest step over fastest step: the least disturbed figures.
        min_ratios = {
            v: round(r["min_s"] / ours_min, 3)
            for v, r in variants.items()
            if v != "ours" and "min_s" in r
        }
        peer_min = {v: x for v, x in min_ratios.items() if v in PEERS}
        best_min = min(peer_min, key=peer_min.get) if peer_min else None
        report["ratios_over_ours"][precision] = {
            **ratios,
            "best_peer": best,
            "best_peer_ratio": ratios.get(best) if best else None,
            "by_min_step": min_ratios,
            "best_peer_by_min": best_min,
            "best_peer_ratio_by_min": min_ratios.get(best_min) if best_min else None,
        }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Shape: {report['shape']}",
        f"Model FLOPs per step: {report['flops_per_step'] / 1e9:.1f} GFLOP "
        f"(3 × forward matmuls); CPU {report['machine']['cpu_model']}, "
        f"{report['machine']['cores']} cores",
        "",
    ]
    peak = report.get("peak", {})
    if peak:
        lines += ["| matmul peak | float32 GFLOP/s | bfloat16 GFLOP/s |", "|---|---|---|"]
        for fw in ("tf", "torch"):
            row = [peak.get(fw, {}).get(p, {}) for p in PRECISIONS]
            cells = [fmt(r.get("best_gflops"), ".1f") if r else "—" for r in row]
            lines.append(f"| {fw} | {' | '.join(cells)} |")
        fp32, bf16 = fmt(peak.get("peak_fp32"), ".1f"), fmt(peak.get("peak_bf16"), ".1f")
        lines.append(f"| **peak** | {fp32} | {bf16} |")
        lines.append("")
    lines += [
        "| precision | variant | median s | min s | max s | tokens/s | GFLOP/s | MFU "
        "| variant/ours (median) | variant/ours (min) | other CPU | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for precision, variants in report["results"].items():
        ratios = report["ratios_over_ours"].get(precision, {})
        for name, r in variants.items():
            if "median_s" not in r:
                error = str(r.get("error", "no result"))[:120].replace("|", "/")
                lines.append(f"| {precision} | {name} | failed: {error} ||||||||||")
                continue
            ratio = 1.0 if name == "ours" else ratios.get(name)
            ratio_min = 1.0 if name == "ours" else ratios.get("by_min_step", {}).get(name)
            note = r.get("attention", "") if name.startswith("hf") else ""
            lines.append(
                f"| {precision} | {name} | {r['median_s']:.3f} | {r['min_s']:.3f} "
                f"| {r['max_s']:.3f} | {r['tokens_per_s']:.0f} | {r['achieved_gflops']:.1f} "
                f"| {fmt(r.get('mfu'), '.1%')} | {fmt(ratio, '.2f')} | {fmt(ratio_min, '.2f')} "
                f"| {fmt(r['other_processes_cpu_fraction'], '.0%')} | {note} |"
            )
    for precision, ratios in report["ratios_over_ours"].items():
        if ratios.get("best_peer"):
            lines.append(
                f"\n{precision}: best peer {ratios['best_peer']} takes "
                f"{ratios['best_peer_ratio']:.2f}× ours' median step time; by fastest step, "
                f"{ratios['best_peer_by_min']} takes {ratios['best_peer_ratio_by_min']:.2f}× "
                "(>1: ours is faster)."
            )
    return "\n".join(lines)
