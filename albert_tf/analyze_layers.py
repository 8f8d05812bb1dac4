"""``python -m albert_tf.analyze_layers``: runs `albert_tf.cli.analyze_layers`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("analyze_layers")
