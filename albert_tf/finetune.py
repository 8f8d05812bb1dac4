"""``python -m albert_tf.finetune``: runs `albert_tf.cli.finetune`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("finetune")
