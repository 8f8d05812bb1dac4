"""``python -m albert_tf.demo_models``: runs `albert_tf.cli.demo_models`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("demo_models")
