"""``python -m albert_tf.predict``: runs `albert_tf.cli.predict`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("predict")
