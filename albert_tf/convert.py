"""``python -m albert_tf.convert``: runs `albert_tf.cli.convert`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("convert")
