"""The start of the scripts that load an exported SavedModel in a fresh process.

``OP_SCAN`` reads the request file named by ``sys.argv[1]`` into ``spec`` (its
``"path"``: the SavedModel), lists the ops the graph and its functions use, and
sorts them by who registers them: ``report["unregistered"]`` (neither core
TensorFlow nor tensorflow-text: TF Serving could not load the model) and
``report["tf_text"]`` (tensorflow-text's). It imports tensorflow and, after the
core scan, tensorflow_text; never albert_tf. A test appends what it runs.
"""

OP_SCAN = r"""
import json, sys
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

spec = json.load(open(sys.argv[1]))
proto = saved_model_pb2.SavedModel()
proto.ParseFromString(open(spec["path"] + "/saved_model.pb", "rb").read())
graph = proto.meta_graphs[0].graph_def
ops = {n.op for n in graph.node}
for f in graph.library.function:
    ops |= {n.op for n in f.node_def}
ops -= {f.signature.name for f in graph.library.function}
core = {o for o in ops if op_def_registry.get(o) is not None}
import tensorflow_text  # noqa: F401  (registers its ops)
report = {"unregistered": sorted(o for o in ops - core if op_def_registry.get(o) is None),
          "tf_text": sorted(o for o in ops - core if op_def_registry.get(o) is not None)}
"""
