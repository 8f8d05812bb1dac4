"""``python -m albert_tf.pretrain``: runs `albert_tf.cli.pretrain`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("pretrain")
