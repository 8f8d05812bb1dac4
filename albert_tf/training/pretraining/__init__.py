"""MLM + SOP pretraining: the trainer, its step functions and what a run keeps on disk.

`trainer.PretrainingTrainer` drives a run; `steps` builds its replicated train and
eval steps; `options` validates the recipe; `run_record` and `checkpoint_layout`
are the run directory; `preemption` and `faults` handle (and inject, for tests)
interruptions.
"""
