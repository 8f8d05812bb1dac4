"""``python -m albert_tf.data_service``: runs `albert_tf.cli.data_service`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("data_service")
