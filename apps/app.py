"""The Streamlit app: four pages, one per fine-tuning task, on exported ALBERT SavedModels.

    streamlit run apps/app.py                          # from the repository root
    streamlit run apps/app.py -- --models_dir=PATH     # another models folder

Each page (``apps/task_pages/``) answers with the SavedModels of its task found in the
models folder, default ``models/exported`` (``apps/README.md``); the sidebar switches
between them, and each page also has its own address (``/classification``,
``/tagging``, ``/question_answering``; multiple choice is the start page).

The folder is not called ``pages/``: Streamlit would take one beside the entry point
for its older multipage layout and list its files itself, ignoring ``st.navigation``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).resolve().parent / "task_pages"

st.navigation(
    [
        st.Page(PAGES / "multiple_choice.py", title="multiple choice", default=True),
        st.Page(PAGES / "classification.py", title="classification"),
        st.Page(PAGES / "tagging.py", title="tagging"),
        st.Page(PAGES / "question_answering.py", title="question answering"),
    ]
).run()
