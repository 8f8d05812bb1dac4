"""Fine-tuning, whatever the task: the loop every task's trainer shares
(`trainer`: `FineTuningTrainer`), a run's options (`options`:
`FineTuningOptions`) and the held-out metrics (`metrics`, numpy only).

Each task's trainer lives in its own folder (``albert_tf/tasks/<task>/trainer.py``,
found through `albert_tf.tasks`); nothing here names a task.
"""
