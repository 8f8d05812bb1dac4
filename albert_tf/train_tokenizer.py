"""``python -m albert_tf.train_tokenizer``: runs `albert_tf.cli.train_tokenizer`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("train_tokenizer")
