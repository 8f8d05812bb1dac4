"""Run a tf.data service dispatcher or worker: ``python -m albert_tf.data_service``.

Pretraining hosts whose CPUs cannot keep their accelerators fed hand reading
and masking to other machines (``python -m albert_tf.pretrain --data_service=...``)::

    python -m albert_tf.data_service --dispatcher --port=5050 [--work_dir=DIR]
    python -m albert_tf.data_service --worker --dispatcher_address=HOST:5050 --port=5051

Each starts TensorFlow's own `tf.data.experimental.service` server, prints the
address it serves on and runs until killed. Workers need this package (and
the shards, at the same paths) installed where they run: they execute the
input pipeline the trainer sends them.
"""

from __future__ import annotations

import socket

from absl import flags

from albert_tf.cli import runner
from albert_tf.cli.runner import UserError

FLAGS = flags.FLAGS
flags.DEFINE_bool("dispatcher", False, "Run the dispatcher (one per service).")
flags.DEFINE_bool("worker", False, "Run a worker (as many as needed, on any machines).")
flags.DEFINE_integer("port", None, "Port to serve on; 0 picks a free one. Required.")
flags.DEFINE_string(
    "work_dir",
    None,
    "Dispatcher only: a directory where the dispatcher journals its state, so that "
    "a restarted dispatcher recovers its jobs (fault-tolerant mode).",
)
flags.DEFINE_string(
    "dispatcher_address", None, "Worker only: the dispatcher's HOST:PORT (no grpc://)."
)
flags.DEFINE_string(
    "worker_address",
    None,
    "Worker only: the HOST:PORT clients reach this worker at; default this "
    "machine's host name and --port.",
)


def main() -> None:
    import tensorflow as tf

    service = tf.data.experimental.service
    if FLAGS.dispatcher == FLAGS.worker:
        raise UserError("Give exactly one of --dispatcher or --worker.")
    if FLAGS.dispatcher:
        if FLAGS.dispatcher_address or FLAGS.worker_address:
            raise UserError("--dispatcher_address and --worker_address are for --worker.")
        server = service.DispatchServer(
            service.DispatcherConfig(
                port=FLAGS.port,
                work_dir=FLAGS.work_dir,
                fault_tolerant_mode=FLAGS.work_dir is not None,
            )
        )
        port = server.target.rsplit(":", 1)[1]
        print(
            f"tf.data service dispatcher at grpc://{socket.gethostname()}:{port}; "
            f"train with --data_service=grpc://{socket.gethostname()}:{port}",
            flush=True,
        )
    else:
        if not FLAGS.dispatcher_address:
            raise UserError("--worker needs --dispatcher_address=HOST:PORT.")
        if FLAGS.work_dir:
            raise UserError("--work_dir is for --dispatcher.")
        dispatcher = FLAGS.dispatcher_address.split("://")[-1]
        # Clients connect to the address the worker registers: "localhost"
        # (TensorFlow's default) would send remote trainers to themselves.
        address = FLAGS.worker_address or f"{socket.gethostname()}:%port%"
        server = service.WorkerServer(
            service.WorkerConfig(
                dispatcher_address=dispatcher, worker_address=address, port=FLAGS.port
            )
        )
        # The bound port (for --port=0) is only exposed through _address.
        bound = address.replace("%port%", server._address.rsplit(":", 1)[1])
        print(f"tf.data service worker at {bound}, serving dispatcher {dispatcher}", flush=True)
    server.join()


def run() -> None:
    """The `albert-data-service` console script."""
    runner.run(main, "data_service", required=["port"])


if __name__ == "__main__":
    run()
