"""Model size: parameters, checkpoint bytes and SavedModel bytes, ALBERT vs BERT-shaped.

The variants (``--variants``) are presets: the paper's ALBERT presets
(``albert_{base,large,xlarge,xxlarge}_v2``: E=128, all layers shared) and their
BERT-shaped twins (``bert_*_shaped``: E=H, nothing shared), V=30000, float32:

* parameters: the backbone (embeddings + E→H projection + encoder + pooler,
  `albert_tf.model_size.parameter_count`, what ``python -m albert_tf.params``
  prints), the multiple-choice model the package builds (backbone + scorer,
  counted on the built model) and the pretraining model (backbone + MLM and
  SOP heads, closed form);
* checkpoint bytes: `albert_tf.save_model` of the multiple-choice model
  (``weights.h5`` + config + tokenizer), on disk;
* SavedModel bytes: the raw-text multiple-choice export
  (`albert_tf.serving.export_saved_model`: graph, weights and the in-graph
  SentencePiece model; tokenizer trained here on the in-repo sample and
  padded to V=30000).

Each preset's checkpoint and export run in fresh processes of their own, one
at a time. A stage that would not fit in the RAM available (estimated as a
multiple of the fp32 weight bytes, see ``--checkpoint_ram_factor`` /
``--export_ram_factor``) is not run: its bytes are *computed* as
4 bytes × parameters + the file overhead measured for the preset of the same
family (sharing) and depth, and marked so. Writes ``bench/results/memory.json``
and prints a markdown table::

    python -m bench.memory                                    # all 8 (~10-20 min, <=12 GB disk)
    python -m bench.memory --smoke                            # tiny shapes, plumbing only
    python -m bench.memory --variants=albert_base_v2,bert_base_shaped
    python -m bench.memory --computed=bert_xxlarge_shaped     # never build that one
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any

from bench import common
from bench.common import Job, Steps, build_padded_tokenizer, dir_bytes

SIZES = ("base", "large", "xlarge", "xxlarge")
PRESETS = tuple(f"albert_{s}_v2" for s in SIZES) + tuple(f"bert_{s}_shaped" for s in SIZES)
SMOKE_PRESETS = ("albert_base_v2", "bert_base_shaped", "albert_xxlarge_v2")
SMOKE_COMPUTED = ("albert_xxlarge_v2",)  # exercises the computed path without building
GB = 1024**3


def preset_config(name: str, smoke: bool):
    """The preset, or in smoke mode the same family shrunk (H/16, layers/6, V=1000)."""
    import albert_tf

    config = albert_tf.get_preset(name)
    if not smoke:
        return config
    hidden = config.hidden_size // 16
    return config.replace(
        vocab_size=1000,
        hidden_size=hidden,
        # BERT-shaped keeps E = H; ALBERT keeps a small factorised E.
        embedding_size=hidden if config.embedding_size == config.hidden_size else 16,
        num_attention_heads=config.num_attention_heads // 4,
        intermediate_size=4 * hidden,
        num_hidden_layers=config.num_hidden_layers // 6,
    )


def family(config) -> str:
    return "albert (shared)" if config.share == "all" else f"bert-shaped (share={config.share})"


def parameters(config) -> dict[str, int]:
    """Closed-form counts; the pretraining heads are Dense H→E + LayerNorm + output
    bias (decoder tied to the embeddings) and Dense H→2."""
    from albert_tf.model_size import parameter_count

    count = parameter_count(config)
    h, e, v = config.hidden_size, config.embedding_size, config.vocab_size
    return {
        "embeddings": count.embedding,
        "projection": count.projection,
        "encoder": count.encoder,
        "pooler": count.pooler,
        "backbone": count.total,
        "multiple_choice_model": count.total + h + 1,
        "pretraining_model": count.total + (h * e + e + 2 * e + v) + (2 * h + 2),
    }


def available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def fits(args: argparse.Namespace, params: int, factor: float) -> tuple[bool, dict[str, Any]]:
    """Whether ``factor`` × the fp32 weights (+ ~1 GB for TF/Keras themselves) fits in free RAM."""
    need = factor * 4 * params + 1.0 * GB
    have = available_bytes() - args.ram_margin_gb * GB
    info = {"estimated_need_gb": round(need / GB, 1), "available_gb": round(have / GB, 1)}
    return args.force_build or need <= have, info


# --------------------------------------------------------------------------- workers
def preset_dir(args: argparse.Namespace) -> str:
    return os.path.join(args.workdir, args.preset)


def run_count(args: argparse.Namespace) -> dict[str, Any]:
    config = preset_config(args.preset, args.smoke)
    return {"config": config.to_hf_dict(), "family": family(config), "params": parameters(config)}


def run_checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    """Builds the multiple-choice model and saves it in the package's format."""
    import keras
    import numpy as np

    import albert_tf
    from albert_tf.checkpoints.saved_format import named_weights
    from albert_tf.tokenizers import load_tokenizer

    out = run_count(args)
    config = preset_config(args.preset, args.smoke)
    ok, ram = fits(args, out["params"]["multiple_choice_model"], args.checkpoint_ram_factor)
    if not ok:
        return out | {"skipped": "not enough RAM to build and save", **ram}
    start = time.perf_counter()
    keras.utils.set_random_seed(0)
    model = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    build_s = time.perf_counter() - start
    # Distinct weights only: a shared layer's weights count once.
    built = sum(int(np.prod(v.shape)) for v in named_weights(model).values())
    start = time.perf_counter()
    directory = os.path.join(preset_dir(args), "model")
    albert_tf.save_model(
        model, directory, tokenizer=load_tokenizer(os.path.join(args.workdir, "tokenizer"))
    )
    save_s = time.perf_counter() - start
    return out | {
        "built_multiple_choice_params": built,
        "built_matches_formula": built == out["params"]["multiple_choice_model"],
        "checkpoint": {
            "how": "measured",
            "bytes": dir_bytes(directory),
            "weights_h5_bytes": dir_bytes(os.path.join(directory, "weights.h5")),
            "tokenizer_bytes": dir_bytes(os.path.join(directory, "tokenizer")),
            "build_s": round(build_s, 1),
            "save_s": round(save_s, 1),
        },
        "ram": ram,
    }


def run_export(args: argparse.Namespace) -> dict[str, Any]:
    """The raw-text multiple-choice SavedModel, through the package's exporter."""
    from albert_tf.serving import export_saved_model

    params = run_count(args)["params"]["multiple_choice_model"]
    ok, ram = fits(args, params, args.export_ram_factor)
    if not ok:
        return {"skipped": "not enough RAM to load and export", **ram}
    start = time.perf_counter()
    # Exporter defaults: max_seq_length 512, max_qa_length 128.
    path = export_saved_model(
        os.path.join(preset_dir(args), "model"),
        os.path.join(preset_dir(args), "exported"),
        version=1,
    )
    export_s = time.perf_counter() - start
    parts = {
        name: dir_bytes(os.path.join(path, name))
        for name in ("saved_model.pb", "variables", "assets", "assets.extra")
        if os.path.exists(os.path.join(path, name))
    }
    return {
        "how": "measured (export_saved_model: raw-text multiple-choice SavedModel)",
        "bytes": dir_bytes(path),
        "parts_bytes": parts,
        "export_s": round(export_s, 1),
        "ram": ram,
    }


# --------------------------------------------------------------------------- report
def fill_computed(report: dict[str, Any]) -> None:
    """Bytes of stages not run: 4 × parameters + a measured preset's overhead.

    The reference is a measured preset of the same family (sharing mode) and,
    if possible, the same depth: then it has the same number of weight arrays
    and the same graph, so its overhead (h5 metadata, graph, tokenizer) carries
    over and only the weight bytes differ.
    """
    results = report["results"]
    for name, r in results.items():
        if "params" not in r:
            continue
        for stage in ("checkpoint", "savedmodel"):
            if r.get(stage, {}).get("how", "").startswith("measured"):
                continue
            refs = [
                (n, o)
                for n, o in results.items()
                if n != name
                and o.get("family") == r["family"]
                and o.get(stage, {}).get("how", "").startswith("measured")
            ]
            if not refs:
                r[stage] = {"how": "not measured; no measured reference to compute from"}
                continue
            layers = r["config"]["num_hidden_layers"]
            ref_name, ref = min(
                refs, key=lambda x: abs(x[1]["config"]["num_hidden_layers"] - layers)
            )
            ref_params = ref["params"]["multiple_choice_model"]
            overhead = ref[stage]["bytes"] - 4 * ref_params
            why = r.get(stage, {}).get("skipped", "forced with --computed")
            r[stage] = {
                "how": f"computed: 4 B × parameters + {ref_name}'s measured overhead",
                "bytes": 4 * r["params"]["multiple_choice_model"] + overhead,
                "reference": ref_name,
                "reference_overhead_bytes": overhead,
                "why_not_measured": why,
            }


def markdown(report: dict[str, Any]) -> str:
    def mb(x: int | None) -> str:
        return "—" if x is None else f"{x / 1e6:,.1f}"

    lines = [
        "float32, V=30000"
        if not report["smoke"]
        else "smoke: tiny shapes (H/16, layers/6, V=1000)",
        "",
        "| preset | family | backbone params | of which embeddings | encoder | pooler "
        "| MC model params | pretraining params | checkpoint MB | SavedModel MB | bytes/param "
        "(SavedModel) | peak RSS MB save / export |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["results"].items():
        if "params" not in r:
            lines.append(f"| {name} | failed: {str(r.get('error'))[:120]} |||||||||||")
            continue
        p = r["params"]
        ck, sm = r.get("checkpoint", {}), r.get("savedmodel", {})

        def cell(stage: dict) -> str:
            if "bytes" not in stage:
                return "—"
            return mb(stage["bytes"]) + (
                "" if stage["how"].startswith("measured") else " (computed)"
            )

        per_param = sm["bytes"] / p["multiple_choice_model"] if "bytes" in sm else None
        rss = f"{r.get('checkpoint_peak_rss_mb', '—')} / {r.get('export_peak_rss_mb', '—')}"
        lines.append(
            f"| {name} | {r['family']} | {p['backbone']:,} | {p['embeddings'] + p['projection']:,} "
            f"| {p['encoder']:,} | {p['pooler']:,} | {p['multiple_choice_model']:,} "
            f"| {p['pretraining_model']:,} | {cell(ck)} | {cell(sm)} "
            f"| {'—' if per_param is None else f'{per_param:.2f}'} | {rss} |"
        )
    lines += [
        "",
        "Checkpoint: albert_tf.save_model of the multiple-choice model (weights.h5 + config + "
        "tokenizer). SavedModel: albert_tf.serving.export_saved_model (raw-text signatures, "
        "tokenizer in the graph). Embeddings include the E→H projection. Computed: not built "
        "(RAM or --computed); 4 bytes × parameters + a measured same-family preset's overhead.",
    ]
    return "\n".join(lines)


class Memory(common.Benchmark):
    name = "memory"
    what = (
        "parameters, checkpoint bytes (albert_tf.save_model) and raw-text "
        "multiple-choice SavedModel bytes (export_saved_model), float32"
    )
    variants = PRESETS
    smoke_variants = SMOKE_PRESETS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--computed", default=None, help="presets never built: bytes computed (smoke: xxlarge)"
        )
        parser.add_argument(
            "--checkpoint_ram_factor",
            type=float,
            default=2.0,
            # Measured at bert_base_shaped: peak RSS ≈ 1 GB + 1.6 × the weights.
            help="RAM to build + save, in fp32 weight sizes (2.0)",
        )
        parser.add_argument(
            "--export_ram_factor",
            type=float,
            default=3.0,
            # The exporter holds the model and the arrays it read; measured ≈ 1 GB + 2.5 × weights.
            help="RAM to export, in fp32 weight sizes (3.0)",
        )
        parser.add_argument("--ram_margin_gb", type=float, default=1.0, help="RAM left to others")
        parser.add_argument("--force_build", action="store_true", help="skip the RAM check")
        parser.add_argument(
            "--tmp_dir", default=None, help="where checkpoints/exports are written (needs ~15 GB)"
        )

    def configure(self, args: argparse.Namespace) -> None:
        if args.computed is None:
            args.computed = ",".join(SMOKE_COMPUTED) if args.smoke else ""
        args.computed = common.choices(args.computed, PRESETS, "preset")

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        ram_gb = round(available_bytes() / GB, 1)
        return {"machine": common.machine_info() | {"ram_gb": ram_gb}, "results": {}}

    def prepare(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        args.workdir = tempfile.mkdtemp(prefix="albert_memory_", dir=args.tmp_dir)
        report["tokenizer"] = yield Job("tokenizer")
        if "error" in report["tokenizer"]:
            raise SystemExit(f"tokenizer failed: {report['tokenizer']['error']}")

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        results = report["results"]
        for preset in args.variants:
            params = {"preset": preset}
            if preset in args.computed:
                results[preset] = yield Job("count", params, f"{preset} counts only (--computed)")
                continue
            r = yield Job("checkpoint", params, f"{preset} build + save_model")
            r["checkpoint_peak_rss_mb"] = r.pop("peak_rss_mb", None)
            if "checkpoint" in r:
                ex = yield Job("export", params, f"{preset} export_saved_model")
                r["export_peak_rss_mb"] = ex.pop("peak_rss_mb", None)
                r["savedmodel"] = ex
            elif "skipped" in r:
                r["checkpoint"] = {"skipped": r.pop("skipped")}
                r["savedmodel"] = {"skipped": "no checkpoint to export"}
            else:  # failed: keep the error, still report the counts
                counts = yield Job("count", params, f"{preset} counts")
                r |= counts | {"error": r.get("error")}
            results[preset] = r
            # Free the disk before the next (bigger) preset.
            shutil.rmtree(os.path.join(args.workdir, preset), ignore_errors=True)

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        common.pin_threads(args, "tf")
        if job.variant == "tokenizer":
            vocab = preset_config(PRESETS[0], args.smoke).vocab_size
            return build_padded_tokenizer(
                os.path.join(args.workdir, "tokenizer"), vocab, args.smoke
            )
        run = {"count": run_count, "checkpoint": run_checkpoint, "export": run_export}
        return run[job.variant](args)

    def summarize(self, report: dict[str, Any]) -> None:
        fill_computed(report)

    def table(self, report: dict[str, Any]) -> str:
        return markdown(report)

    def cleanup(self, args: argparse.Namespace) -> None:
        if getattr(args, "workdir", None):
            shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    common.main(Memory())
