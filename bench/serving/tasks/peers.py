"""The peers: Hugging Face pipelines and ONNX Runtime, on our models' weights.

``hf``: transformers' ``question-answering``, ``token-classification``
(``aggregation_strategy="first"``) and ``text-classification`` pipelines on the
model ``convert --target=hf`` wrote, set to the export's windows (the same
``max_seq_length``, the same step between windows, the same longest answer).
``ort_*``: the same pipelines with the forward pass in ONNX Runtime (the model
exported by ``torch.onnx``, optimised by ``onnxruntime.transformers``, float32 and
int8): the pipeline's pre- and post-processing in Python around it, as optimum's
``ORTModel`` classes serve it. These workers never import TensorFlow or albert_tf.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench.serving.peers import ort_session
from bench.serving.tasks.answers import pipeline_answers
from bench.serving.tasks.workload import ORT, TASKS, hf_dir, prepared, requests
from bench.serving.workdir import ONNX_INFO
from bench.serving.workload import time_answers

#: Hugging Face's model class of each task.
HF_CLASSES = {
    "span_qa": "AlbertForQuestionAnswering",
    "tagging": "AlbertForTokenClassification",
    "classification": "AlbertForSequenceClassification",
}
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_outputs(task: str) -> list[str]:
    return ["start_logits", "end_logits"] if task == "span_qa" else ["logits"]


def hf_model(workdir: str, task: str, attention: str):
    import transformers

    model_class = getattr(transformers, HF_CLASSES[task])
    return model_class.from_pretrained(hf_dir(workdir, task), attn_implementation=attention).eval()


def hf_tokenizer(workdir: str, task: str):
    import transformers

    settings = prepared(workdir)["tasks"][task]["settings"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir(workdir, task))
    # The export's window: truncation and the tagging pipeline's chunks follow it.
    tokenizer.model_max_length = int(settings.get("max_seq_length", 512))
    return tokenizer


def pipeline_call(args: argparse.Namespace, pipe, tokenizer) -> tuple[Any, dict[str, Any]]:
    """The pipeline call of ``args.workload``'s requests, and its settings."""
    task = args.task
    inputs = requests(task, args.workload)
    settings = prepared(args.workdir)["tasks"][task]["settings"]
    max_seq_length = tokenizer.model_max_length
    if task == "span_qa":
        max_query = int(settings["max_query_length"])
        lengths = {
            min(len(tokenizer(q, add_special_tokens=False)["input_ids"]), max_query)
            for q in inputs["question"]
        }
        if len(lengths) != 1:
            raise ValueError(f"questions of {sorted(lengths)} pieces: one overlap cannot fit all")
        # Our doc_stride is the step between windows (run_squad's); Hugging Face's
        # is their overlap: the same windows take window width - step.
        width = max_seq_length - 3 - lengths.pop()
        kwargs = {
            "max_seq_len": max_seq_length,
            "max_question_len": max_query,
            "doc_stride": width - min(int(settings["doc_stride"]), width),
            "max_answer_len": int(settings["max_answer_length"]),
            "align_to_words": True,
            "handle_impossible_answer": False,
        }
        call = {"question": inputs["question"], "context": inputs["context"]}
    elif task == "tagging":
        # Chunks of max_seq_length with no overlap: our windows.
        kwargs = {"aggregation_strategy": "first", "stride": 0}
        call = {"inputs": inputs["text"]}
    else:
        kwargs = {"truncation": True}
        call = {"inputs": inputs["text"]}
    kwargs["batch_size"] = args.hf_batch_size
    return (lambda: pipe(**call, **kwargs)), {**kwargs, "pipeline": TASKS[task].pipeline}


def build_pipeline(args: argparse.Namespace, model, tokenizer):
    import transformers

    return transformers.pipeline(
        TASKS[args.task].pipeline, model=model, tokenizer=tokenizer, device=-1
    )


def measure_pipeline(args: argparse.Namespace, pipe, tokenizer, info: dict) -> dict[str, Any]:
    import torch

    run, kwargs = pipeline_call(args, pipe, tokenizer)
    count = len(next(iter(requests(args.task, args.workload).values())))

    def step() -> float:
        with torch.inference_mode():
            return float(len(pipeline_answers(args.task, run())))

    timing = time_answers(step, args.warmup, args.repeats)
    answers = pipeline_answers(args.task, run())
    if len(answers) != count:
        raise ValueError(f"{len(answers)} answers for {count} requests")
    return {**timing, **info, "answers": answers, "pipeline_settings": kwargs}


def measure_hf(args: argparse.Namespace) -> dict[str, Any]:
    tokenizer = hf_tokenizer(args.workdir, args.task)
    model = hf_model(args.workdir, args.task, args.hf_attention)
    pipe = build_pipeline(args, model, tokenizer)
    info = {
        "model": f"transformers {HF_CLASSES[args.task]} (our weights via convert --target=hf), "
        "eval, torch.inference_mode",
        "attention": model.config._attn_implementation,
        "tokenizer": type(tokenizer).__name__,
    }
    return measure_pipeline(args, pipe, tokenizer, info)


class OrtForward:
    """The pipeline's model, run by ONNX Runtime: torch tensors in, a dict of torch
    tensors out, the Hugging Face config beside it (what the pipelines read)."""

    def __init__(self, session, config):
        self.session = session
        self.config = config
        self.outputs = [o.name for o in session.get_outputs()]
        self.inputs = {i.name for i in session.get_inputs()}

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        import numpy as np
        import torch

        given = {
            "input_ids": input_ids,
            "attention_mask": attention_mask
            if attention_mask is not None
            else torch.ones_like(input_ids),
            "token_type_ids": token_type_ids
            if token_type_ids is not None
            else torch.zeros_like(input_ids),
        }
        feed = {k: v.numpy().astype(np.int64) for k, v in given.items() if k in self.inputs}
        values = self.session.run(self.outputs, feed)
        return {k: torch.from_numpy(v) for k, v in zip(self.outputs, values, strict=True)}

    __call__ = forward


def measure_ort(args: argparse.Namespace, which: str) -> dict[str, Any]:
    import onnxruntime

    with open(os.path.join(args.workdir, ONNX_INFO)) as f:
        path = json.load(f)["tasks"][args.task]["files"][which]
    session, load_s = ort_session(path, args.inter_op_threads)
    tokenizer = hf_tokenizer(args.workdir, args.task)
    model = hf_model(args.workdir, args.task, "eager")
    pipe = build_pipeline(args, model, tokenizer)
    # The pipeline keeps its pre- and post-processing; only the forward pass moves.
    pipe.model = OrtForward(session, model.config)
    del model
    info = {
        "model": f"ONNX Runtime {onnxruntime.__version__}, {which}, CPUExecutionProvider, "
        "inside the transformers pipeline",
        "load_s": round(load_s, 2),
        "bytes": os.path.getsize(path),
    }
    return measure_pipeline(args, pipe, tokenizer, info)


def prepare_onnx(args: argparse.Namespace) -> dict[str, Any]:
    """Each task's Hugging Face model → ONNX → optimised → int8 (dynamic quantisation)."""
    import numpy as np
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    report: dict[str, Any] = {"onnxruntime": onnxruntime.__version__, "tasks": {}}
    for task in args.tasks:
        start = time.perf_counter()
        # Eager attention: the pattern onnxruntime's BERT fusion recognises.
        model = hf_model(args.workdir, task, "eager")
        tokenizer = hf_tokenizer(args.workdir, task)
        sample = tokenizer(
            ["一个例子。", "another, longer example text"], padding=True, return_tensors="pt"
        )
        dummy = tuple(sample[k] for k in ONNX_INPUTS)
        out_dir = os.path.join(args.workdir, task, "onnx")
        os.makedirs(out_dir, exist_ok=True)
        files = {n: os.path.join(out_dir, f"{n}.onnx") for n in ("plain", *ORT.values())}
        outputs = onnx_outputs(task)
        torch.onnx.export(
            model,
            dummy,
            files["plain"],
            input_names=list(ONNX_INPUTS),
            output_names=outputs,
            dynamic_axes={
                **{k: {0: "batch", 1: "sequence"} for k in ONNX_INPUTS},
                **{k: {0: "batch", 1: "sequence"} for k in outputs if task != "classification"},
                **({"logits": {0: "batch"}} if task == "classification" else {}),
            },
            opset_version=17,
            dynamo=False,  # the TorchScript exporter: the one optimizer.py's fusions target
        )
        optimized = optimize_model(
            files["plain"],
            model_type="bert",
            num_heads=model.config.num_attention_heads,
            hidden_size=model.config.hidden_size,
        )
        fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
        optimized.save_model_to_file(files["optimized"])
        quantize_dynamic(
            files["optimized"],
            files["optimized_int8"],
            weight_type=QuantType.QInt8,
            # Shape inference cannot type the ops the fusions introduce.
            extra_options={"DefaultTensorType": 1},  # onnx.TensorProto.FLOAT
        )
        with torch.inference_mode():
            want = model(**{k: sample[k] for k in ONNX_INPUTS})
        session = onnxruntime.InferenceSession(
            files["optimized"], providers=["CPUExecutionProvider"]
        )
        got = session.run(outputs, {k: sample[k].numpy() for k in ONNX_INPUTS})
        difference = max(
            float(np.abs(g - want[name].numpy()).max())
            for g, name in zip(got, outputs, strict=True)
        )
        report["tasks"][task] = {
            "files": {k: v for k, v in files.items() if k != "plain"},
            "bytes": {k: os.path.getsize(v) for k, v in files.items()},
            "optimizer_fused_ops": fused,
            "max_abs_logit_difference_optimized_fp32_vs_torch": difference,
            "prepare_s": round(time.perf_counter() - start, 1),
        }
    report["exporter"] = f"torch.onnx.export (TorchScript), torch {torch.__version__}, opset 17"
    return report
