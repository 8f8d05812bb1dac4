"""``python -m albert_tf.evaluate_pretraining``: runs `albert_tf.cli.evaluate_pretraining`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("evaluate_pretraining")
