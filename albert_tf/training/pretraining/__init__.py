"""MLM + SOP pretraining: the trainer, its step functions and what a run keeps on disk.

`trainer.PretrainingTrainer` drives a run; `steps` builds its replicated train and
eval steps; `options` validates the recipe; `run_record` and `checkpoint_layout`
are the run directory; `preemption` handles interruptions; `hooks` are the points
where code outside the loop may act, and `faults` injects interruptions through them
for the recovery tests.
"""
