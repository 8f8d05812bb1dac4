"""``python -m albert_tf.plot_metrics``: runs `albert_tf.cli.plot_metrics`."""

if __name__ == "__main__":
    from albert_tf.cli import launch

    launch("plot_metrics")
