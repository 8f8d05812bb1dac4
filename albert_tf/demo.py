"""``python -m albert_tf.demo``: runs `albert_tf.cli.demo`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("demo")
