"""``python -m albert_tf.build_corpus``: runs `albert_tf.cli.build_corpus`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("build_corpus")
