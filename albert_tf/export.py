"""``python -m albert_tf.export``: runs `albert_tf.cli.export`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("export")
