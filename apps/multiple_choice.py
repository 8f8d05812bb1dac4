"""The app's old entry point, from when the multiple-choice page was the main script:
``streamlit run apps/multiple_choice.py`` still serves the whole app. Use
``streamlit run apps/app.py``; this name goes once nothing points to it any more."""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).with_name("app.py")))
