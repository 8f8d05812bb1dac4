"""``python -m albert_tf.create_pretraining_data``: runs `albert_tf.cli.create_pretraining_data`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("create_pretraining_data")
