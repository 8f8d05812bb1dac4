"""``python -m albert_tf.params``: runs `albert_tf.cli.params`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("params")
