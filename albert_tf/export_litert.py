"""``python -m albert_tf.export_litert``: runs `albert_tf.cli.export_litert`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("export_litert")
