"""`bench.serving.tasks`' report: p90, requests/s and agreement per result, ratios
per workload, the markdown table."""

from __future__ import annotations

from typing import Any

from bench.common import fmt, summary_stats
from bench.serving.tasks.answers import agreement
from bench.serving.tasks.workload import REFERENCE, TASKS

OURS = ("savedmodel", "savedmodel_bf16", "savedmodel_int8", "savedmodel_xla", "savedmodel_xla_bf16")


def summarize(report: dict[str, Any]) -> None:
    """In place: each result's ``p90_s``, ``requests_per_s`` and ``agreement`` (with
    `REFERENCE`'s answers), and ``summary[task][workload]``: ratios of medians."""
    for task, workloads in report["results"].items():
        for workload, variants in workloads.items():
            count = TASKS[task].workloads[workload]
            reference = variants.get(REFERENCE, {}).get("answers")
            hf = variants.get("hf", {}).get("answers")
            for name, result in variants.items():
                if "times_s" not in result:
                    continue
                result["p90_s"] = summary_stats(result["times_s"])["p90"]
                result["requests_per_s"] = round(count / result["median_s"], 2)
                if reference is not None and "answers" in result:
                    result["agreement"] = agreement(result["answers"], reference)
                # ONNX Runtime inside the pipeline: the same post-processing as hf's.
                if name.startswith("ort") and hf is not None and "answers" in result:
                    result["agreement_with_hf"] = agreement(result["answers"], hf)
            report["summary"].setdefault(task, {})[workload] = ratios(variants)


def ratios(variants: dict[str, Any]) -> dict[str, Any]:
    """Ratios of medians (> 1: the second named is faster) and the fastest of ours."""
    med = {v: r["median_s"] for v, r in variants.items() if "median_s" in r}
    out: dict[str, Any] = {}

    def ratio(name: str, numerator: str | None, denominator: str | None) -> None:
        if numerator in med and denominator in med:
            out[name] = round(med[numerator] / med[denominator], 3)

    ours = [v for v in OURS if v in med]
    if ours:
        best = min(ours, key=med.get)
        out["our_fastest"] = best
        ratio("hf_over_our_fastest", "hf", best)
        ratio("ort_int8_over_our_fastest", "ort_opt_int8", best)
        ratio("ort_fp32_over_our_fastest", "ort_opt_fp32", best)
    ratio("hf_over_savedmodel", "hf", "savedmodel")
    ratio("ort_fp32_over_savedmodel", "ort_opt_fp32", "savedmodel")
    ratio("xla_speedup_fp32", "savedmodel", "savedmodel_xla")
    ratio("xla_speedup_bf16", "savedmodel_bf16", "savedmodel_xla_bf16")
    ratio("bf16_speedup", "savedmodel", "savedmodel_bf16")
    ratio("int8_speedup", "savedmodel", "savedmodel_int8")
    return out


def _agreement_text(result: dict[str, Any]) -> str:
    agree = result.get("agreement")
    if not agree:
        return ""
    text = f"{agree['same']}/{agree['of']}"
    if "entities" in agree:
        e = agree["entities"]
        text += f" (entities: {e['both']} shared, ours {e['ours']}, theirs {e['theirs']})"
    return text


def markdown(report: dict[str, Any]) -> str:
    machine = report["machine"]
    lines = [
        f"CPU {machine['cpu_model']}, {machine['cores']} cores; answers compared with "
        f"{REFERENCE}'s",
        "",
        "| task | workload | variant | median ms | p90 ms | requests/s | peak RSS MB "
        "| first call s | same answers | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task, workloads in report["results"].items():
        for workload, variants in workloads.items():
            for name, r in variants.items():
                if "median_s" not in r:
                    error = str(r.get("error", "not run"))[:120].replace("|", "/")
                    lines.append(f"| {task} | {workload} | {name} | failed: {error} |||||||")
                    continue
                note = ""
                if "model_input_shape" in r:
                    note = (
                        f"model input {r['model_input_shape']}, tokenize signature "
                        f"{r['tokenize_median_s'] * 1e3:.1f} ms, load {r['load_s']} s"
                    )
                if "agreement_with_hf" in r:
                    a = r["agreement_with_hf"]
                    note = f"same answers as hf: {a['same']}/{a['of']}"
                lines.append(
                    f"| {task} | {workload} | {name} | {r['median_s'] * 1e3:.1f} "
                    f"| {r['p90_s'] * 1e3:.1f} | {r['requests_per_s']:.1f} "
                    f"| {fmt(r.get('peak_rss_mb'), 'd')} | {r['first_step_s']:.2f} "
                    f"| {_agreement_text(r)} | {note} |"
                )
    lines.append("")
    for task, workloads in report["summary"].items():
        for workload, shown in workloads.items():
            text = ", ".join(f"{k} {v}" for k, v in shown.items())
            lines.append(f"{task} {workload}: {text or 'no ratios (missing variants)'}")
    return "\n".join(lines)
