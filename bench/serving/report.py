"""The serving report: ratios of medians per workload, the markdown table."""

from __future__ import annotations

from typing import Any

from bench.common import fmt
from bench.serving.workload import LITERT, ORT, ORT_BUCKETED


def summarize(report: dict[str, Any]) -> None:
    """Ratios of medians per workload, in place (> 1: the second named is faster)."""
    for workload, variants in report["results"].items():
        report["ratios"][workload] = workload_ratios(variants)


def workload_ratios(variants: dict[str, Any]) -> dict[str, Any]:
    """Ratios of the medians of one workload's variants; each key says which over which."""
    med = {v: r["median_s"] for v, r in variants.items() if "median_s" in r}
    hf = variants.get("hf", {})
    ratios: dict[str, Any] = {}

    def ratio(name: str, numerator: str | None, denominator: str | None) -> None:
        if numerator in med and denominator in med:
            ratios[name] = round(med[numerator] / med[denominator], 3)

    def fastest(names) -> str | None:
        present = [n for n in names if n in med]
        return min(present, key=med.get) if present else None

    ours = fastest(("savedmodel", "savedmodel_bf16", "savedmodel_int8"))
    ort_int8 = fastest(("ort_int8", "ort_opt_int8"))
    ort_fp32 = fastest(("ort_fp32", "ort_opt_fp32"))
    if ours:
        ratios["our_fastest"] = ours
    ratio("savedmodel_over_bare_encoder", "savedmodel", "bare_encoder")
    ratio("hf_over_savedmodel", "hf", "savedmodel")
    # The targets: ours faster than ORT int8 (> 1), float32 within 1.1x.
    ratio("ort_int8_over_our_fastest", ort_int8, ours)
    ratio("ort_int8_buckets_over_our_fastest", "ort_opt_int8_buckets", ours)
    ratio("our_fp32_over_ort_fp32", "savedmodel", ort_fp32)
    ratio("bf16_speedup", "savedmodel", "savedmodel_bf16")
    ratio("int8_speedup", "savedmodel", "savedmodel_int8")
    # The seed's claim: same FLOPs, so shared weights win only through caches.
    ratio("not_shared_over_shared_fp32", "not_shared", "savedmodel")
    ratio("not_shared_over_shared_bf16", "not_shared_bf16", "savedmodel_bf16")
    ratio("not_shared_over_shared_int8", "not_shared_int8", "savedmodel_int8")
    ratio("litert_int8_over_our_fastest", "litert_int8", ours)
    ratio("tokenize_share_of_savedmodel", "savedmodel_tokenize", "savedmodel")
    if "bare_encoder" in med and "model_forward" in hf:
        ratios["hf_forward_over_bare_encoder"] = round(
            hf["model_forward"]["median_s"] / med["bare_encoder"], 3
        )
    return ratios


def markdown(report: dict[str, Any]) -> str:
    prep = report["prepared"]
    cfg = prep["config"]
    lines = [
        f"Model: V={cfg['vocab_size']}, E={cfg['embedding_size']}, H={cfg['hidden_size']}, "
        f"L={cfg['num_hidden_layers']} (shared), heads {cfg['num_attention_heads']}, "
        f"FFN {cfg['intermediate_size']}; tokenizer {prep['tokenizer']['trained_pieces']} "
        f"trained pieces padded to {prep['tokenizer']['vocab_size']}; exporter limits "
        f"max_seq_length {prep['max_seq_length']}, max_qa_length {prep['max_qa_length']} "
        "(batches padded to their longest option); "
        f"CPU {report['machine']['cpu_model']}, {report['machine']['cores']} cores",
        "",
    ]
    for workload in report["results"]:
        w = prep["workloads"][workload]
        lengths = w["sequence_lengths"]
        lines.append(
            f"{workload}: packed {w['packed_shape']} (real lengths min {lengths['min']}, "
            f"median {lengths['median']}, max {lengths['max']}; {w['padding_fraction']:.0%} "
            f"padding; {w['pieces_per_word']} pieces/word; context median "
            f"{w['words']['context']['median']} words)"
        )
    lines += [
        "",
        "| workload | variant | encoder input [B·C, S] | median ms | min ms | max ms | items/s "
        "| other CPU | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, variants in report["results"].items():
        batch = prep["workloads"][workload]["batch"]
        for name, r in variants.items():
            if "median_s" not in r:
                error = str(r.get("error", "no result"))[:120].replace("|", "/")
                lines.append(f"| {workload} | {name} | failed: {error} |||||||")
                continue
            # Each variant's own input: HF's fast tokenizer may pack a piece or two differently.
            b, c, length = r["input_shape"]
            shape = (b * c, length)
            note = ""
            if name.startswith("savedmodel") or name.startswith("not_shared"):
                note = f"signature {r['signature']}, load {r['load_s']} s"
            if name in ORT or name in ORT_BUCKETED:
                same = "yes" if r["same_ids_as_ours"]["fast"] else "no"
                note = (
                    f"HF fast tokeniser {r['tokenizer_fast']['median_s'] * 1e3:.1f} ms + "
                    f"run {r['model_forward']['median_s'] * 1e3:.1f} ms; ids equal ours: {same}"
                )
            if name in LITERT:
                note = r["model"]
            if name == "hf":
                same = {k: "yes" if v else "no" for k, v in r["same_ids_as_ours"].items()}
                note = (
                    f"fast tokeniser + forward ({r['attention']}); ids equal ours: "
                    f"fast {same['fast']}, slow {same['slow']}"
                )
            lines.append(
                f"| {workload} | {name} | {shape[0]}×{shape[1]} | {r['median_s'] * 1e3:.1f} "
                f"| {r['min_s'] * 1e3:.1f} | {r['max_s'] * 1e3:.1f} "
                f"| {batch / r['median_s']:.2f} "
                f"| {fmt(r['other_processes_cpu_fraction'], '.0%')} | {note} |"
            )
            if name == "hf":
                for part in ("tokenizer_fast", "tokenizer_slow", "model_forward"):
                    p = r[part]
                    key = "input_shape_slow" if part == "tokenizer_slow" else "input_shape"
                    b, c, length = r[key]
                    lines.append(
                        f"| {workload} | hf: {part} | {b * c}×{length} "
                        f"| {p['median_s'] * 1e3:.1f} | {p['min_s'] * 1e3:.1f} "
                        f"| {p['max_s'] * 1e3:.1f} | | | |"
                    )
    lines.append("")
    for workload, ratios in report["ratios"].items():
        shown = ", ".join(f"{k} {v}" for k, v in ratios.items() if not k.startswith("target"))
        lines.append(f"{workload}: {shown or 'no ratios (missing variants)'}")
    lines.append(
        "Targets: ort_int8 (faster of plain/optimised) over our fastest faithful variant > 1; "
        "our float32 over ORT float32 <= 1.1; tokenisation <= 2% of the answer. Fidelity: "
        "bench/results/serving_fidelity.json."
    )
    return "\n".join(lines)
