"""What the tests share, in one place (importable as ``helpers.*`` because pyproject.toml
puts tests/ on pytest's ``pythonpath``; worker scripts run in a subprocess put tests/ on
``sys.path`` themselves).

* `paths`: the repository and its tests/ folder, whatever a test's depth under tests/.
* `testing_utils`: tiny configs and batches, the layer contract (`run_layer_test`),
  executed-op lists, TF1 checkpoints written by hand, the build lock for session builds.
* `numerics`: tolerances from floating-point arithmetic (`albert_budget`,
  `assert_normwise_close`) and the oneDNN instruction-set ladder; `test_numerics.py`
  beside it checks them.
* `commands`: a package command run in a subprocess (`run_command`).
* `training_utils`: tiny pretraining runs (config, options, the pretrain command, ports).
* `mc_helpers`: the tiny English and Chinese multiple-choice models, built once a session.
* `classifier_helpers`: the tiny text classifiers of the app tests, built once a session.
* `finetuning_start`: what a tiny fine-tuning run starts from (`tiny_start`), and rows
  served through TFDS's mock data in a dataset's own layout (`tfds_rows`).
* `span_task_helpers`: the tiny Chinese tagger and span QA model of the app tests, built
  once a session.
* `serving_scripts`: the op-registry scan that starts a fresh-process SavedModel script.
* `hf_reference`: random Hugging Face ALBERT models to compare against (torch).
* `app_browser`: the Streamlit app under `streamlit run`, driven by headless Chromium.
* `tokenizer_inputs`: texts that exercise every normalisation step (id and offset parity).
* `tokenizer_export`: a tokenizer alone in a SavedModel, and the fresh-process script
  that serves it.
"""
