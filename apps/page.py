"""The skeleton every page of the Streamlit app shares, and the one cached SavedModel loader.

A page is a `TaskPage` subclass that says what is its own (its task, its input fields,
its examples, how it checks the input and renders an answer); `TaskPage.run` does the
rest, the same way on every page: the models folder and the models of the page's task
(or the command that makes one), the model choice, the examples in the languages those
models read, the input, the call to the SavedModel's ``serving_default`` (timed) and
``tokenize``, the model card, the [UNK] warning, the latency and the tokenisation view.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import streamlit as st
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModels use)
from exported_models import (
    AUTOMATIC,
    LANGUAGE_NAMES,
    UNK_WARNING_SHARE,
    choose_model,
    detect_language,
    find_models,
    model_info,
    model_language,
    models_dir,
    unknown_share,
)

EXPORT_COMMAND = "python -m albert_tf.export --checkpoint=runs/NAME/best --export_dir={folder}/NAME"


@dataclass(frozen=True)
class Field:
    """One input of a page: a text area, or a one-line text input."""

    name: str
    label: str
    height: int | None = None  # None: a one-line text input


@dataclass(frozen=True)
class Example:
    """An input a visitor can pick, in one language (``"zh"``, ``"en"``): the
    values of the page's fields, as typed."""

    label: str
    language: str
    values: dict[str, str]


@dataclass(frozen=True)
class Answer:
    """One call of the SavedModel on the visitor's input, and what the page shows with it."""

    name: str  # the model's entry in the page's list
    reason: str  # why that model answered
    language: str | None  # the language the model reads (export metadata, else card)
    meta: dict  # assets.extra/albert_tf.json
    card: dict  # assets.extra/model_card.json ({} when absent)
    values: dict[str, Any]  # the checked input, in the page's own form
    result: dict[str, np.ndarray]  # serving_default's outputs
    packed: dict[str, np.ndarray]  # tokenize's outputs
    latency_ms: float
    pieces: list[str] = field(default_factory=list)  # the pieces read, padding dropped


def number(value: object) -> float | None:
    """A card value as a float, or None when it is not a number (cards have no schema).

    >>> number(0.5), number(3), number(True), number("0.5")
    (0.5, 3.0, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def held_out_metric(label: str, value: float, baseline: float | None, name: str, fmt: str) -> None:
    """A held-out figure in the sidebar (``fmt``: ``".3f"``, ``".1%"``), its
    difference from a baseline called ``name`` as the delta (none without one)."""
    delta = None if baseline is None else f"{value - baseline:+{fmt}} vs {name} {baseline:{fmt}}"
    st.sidebar.metric(label, f"{value:{fmt}}", delta)


def scores_table(table: Any, column: str, fmt: str) -> None:
    """A table whose ``column`` holds scores in [0, 1], drawn as bars (``fmt``: printf)."""
    progress = st.column_config.ProgressColumn(column, format=fmt, min_value=0.0, max_value=1.0)
    st.dataframe(table, hide_index=True, column_config={column: progress})


def describe(value: object) -> str:
    """A card entry on one line, whatever its shape (text, number, list or mapping).

    >>> describe({"steps": 2800, "data": ["a", "b"], "loss": 1.23456})
    'steps: 2,800; data: a, b; loss: 1.235'
    """
    if isinstance(value, dict):
        return "; ".join(f"{k}: {describe(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(describe(v) for v in value)
    if number(value) is not None:
        return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"
    return str(value)


def real_pieces(packed: dict[str, np.ndarray]) -> list[str]:
    """Every piece ``tokenize`` packed, in order, without the padding: where the
    output has a ``padding_mask`` it says which are real, else padding is ``""``."""
    pieces = packed["pieces"]
    keep = packed["padding_mask"] > 0 if "padding_mask" in packed else pieces != b""
    return [p.decode("utf-8", "replace") for p in pieces[keep]]


@st.cache_resource(show_spinner="Loading the SavedModel…")
def load_saved_model(path: str, _warm_up: Iterable[dict[str, tf.Tensor]] = ()) -> Any:
    """The SavedModel at ``path``, loaded once per path and process for every page and
    rerun, and warmed up: kernels are built per input shape on first use, so both
    signatures run once on each of ``_warm_up``'s inputs (the shapes a visitor sends) and
    the latency a page shows is a warm model's. ``_warm_up`` is not part of the cache key
    (Streamlit skips arguments named with a leading underscore); it is iterated only
    when the model is loaded, so a lazy iterable costs nothing on a cache hit."""
    model = tf.saved_model.load(path)
    for inputs in _warm_up:
        model.signatures["serving_default"](**inputs)
        model.signatures["tokenize"](**inputs)
    return model


class TaskPage:
    """The page of one task. Subclasses set the class attributes and implement
    `validate`, `inputs`, `show_result` and `token_rows`; the other hooks are optional."""

    title: ClassVar[str]
    caption: ClassVar[str]
    tasks: ClassVar[tuple[str | None, ...]]  # the export's "task" values this page answers
    task_name: ClassVar[str]  # for the message when the folder has no model of the task
    how_to_get_one: ClassVar[str]  # ... and what it says next, before the command
    command: ClassVar[str]  # the recipe that makes a model of the task
    key: ClassVar[str]  # prefix of the page's session_state keys (pages share the state)
    fields: ClassVar[tuple[Field, ...]]
    examples: ClassVar[tuple[Example, ...]]  # the first one a model reads opens the page
    tokens_title: ClassVar[str] = "How the input was tokenised"

    # What is each page's own.

    def validate(self, values: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        """The fields cut down to what the model can use, in the page's own form, and
        notes on what was cut. Raises ValueError with the message to show instead of
        an answer."""
        raise NotImplementedError

    def inputs(self, values: dict[str, Any]) -> dict[str, tf.Tensor]:
        """The signatures' inputs (a batch of one) for checked values."""
        raise NotImplementedError

    def warm_up_values(self, values: dict[str, str]) -> list[dict[str, str]]:
        """What to warm a model up with, as typed, from the example of its language:
        by default the example alone; pages add the other shapes visitors send."""
        return [values]

    def card_summary(self, answer: Answer) -> str:
        """What the card's first line says after the name and language."""
        return ""

    def show_held_out(self, held: dict) -> None:
        """The card's held-out figures (its ``held_out`` mapping), in the sidebar."""

    def show_card(self, answer: Answer) -> None:
        """The card's body in the sidebar: what it was trained on and for, the held-out
        figures, what it is good and bad at. Every key is optional."""
        card = answer.card
        if card.get("task"):
            st.sidebar.markdown(f"**Task:** {describe(card['task'])}")
        trained_on = next(
            (card[k] for k in ("trained_on", "data", "dataset", "training_data") if card.get(k)),
            None,
        )
        if trained_on is not None:
            st.sidebar.markdown(f"**Trained on:** {describe(trained_on)}")
        for key, title in (("pretraining", "Pretraining"), ("finetuning", "Fine-tuning")):
            if card.get(key):
                st.sidebar.caption(f"{title}: {describe(card[key])}")
        self.show_held_out(card["held_out"] if isinstance(card.get("held_out"), dict) else {})
        for key, title in (("good_at", "Good at"), ("not_good_at", "Not good at")):
            if card.get(key):
                st.sidebar.markdown(f"**{title}:** {describe(card[key])}")

    def show_result(self, answer: Answer, left: Any, right: Any) -> None:
        """The answer: ``left`` is the wide column, ``right`` the narrow one (the
        latency is already there); what follows goes below both."""
        raise NotImplementedError

    def token_rows(self, answer: Answer) -> list[tuple[str | None, list[str]]]:
        """The tokenisation view's rows: a title (or None) and its pieces."""
        raise NotImplementedError

    # The skeleton.

    def run(self) -> None:
        st.set_page_config(page_title=self.title, layout="wide")
        st.title(self.title)
        st.caption(self.caption)
        folder = models_dir()
        # Read-only: set when the app starts (apps/README.md, "Serving the demo to others").
        st.sidebar.caption(f"Models folder: `{folder}`")
        models = find_models(folder, self.tasks)
        if not models:
            st.error(
                f"No exported model found in `{folder}` for {self.task_name}. {self.how_to_get_one}"
            )
            st.code(self.command, language="bash")
            st.info(f"Or export a fine-tuned checkpoint: `{EXPORT_COMMAND.format(folder=folder)}`")
            st.stop()
        choice = st.sidebar.selectbox("Model", [AUTOMATIC, *models], key=f"{self.key}_model")
        typed = self._input(models)
        try:
            values, notes = self.validate(typed)
        except ValueError as err:
            st.warning(str(err))
            st.stop()
        for note in notes:
            st.info(note)

        name, reason = choose_model(models, choice, detect_language(" ".join(typed.values())))
        answer = self._answer(name, reason, models[name], values)
        self._show_card(answer)
        language = LANGUAGE_NAMES.get(answer.language or "", answer.language)
        st.caption(f"Answered by **{name}** ({language or '?'}): {reason}.")
        unknown = unknown_share(answer.pieces)
        if unknown > UNK_WARNING_SHARE:
            st.warning(
                f"{unknown:.0%} of the input's pieces are unknown to this model's vocabulary "
                f"([UNK]); what it answers means little. Is the text in "
                f"{language or 'its language'}?"
            )
        left, right = st.columns([3, 1])
        with right:
            st.metric("Latency (serving_default, warm)", f"{answer.latency_ms:.1f} ms")
        self.show_result(answer, left, right)
        with st.expander(self.tokens_title, expanded=False):
            for title, pieces in self.token_rows(answer):
                if title is not None:
                    st.markdown(f"**{title}** — {len(pieces)} pieces")
                st.code(" ".join(pieces), language=None)

    def offered_examples(self, models: dict[str, Path]) -> list[Example]:
        """The examples in a language one of ``models`` reads: another language's
        example would go to a model that knows none of its pieces."""
        languages = {model_language(path) for path in models.values()}
        return [e for e in self.examples if e.language in languages]

    def _input(self, models: dict[str, Path]) -> dict[str, str]:
        """The example picker and the fields; returns the fields' values as typed."""
        offered = self.offered_examples(models)
        labels = [e.label for e in offered]
        picked = f"{self.key}_example"
        # First visit (or a folder whose models changed): the first example a model reads.
        if picked not in st.session_state or (labels and st.session_state[picked] not in labels):
            st.session_state[picked] = labels[0] if labels else None
            self._fill(offered[0].values if offered else {})
        if offered:
            st.radio(
                "Example",
                labels,
                key=picked,
                horizontal=True,
                on_change=self._set_example,
                args=(offered,),
            )
        else:
            read = ", ".join(sorted(filter(None, (model_language(p) for p in models.values()))))
            st.caption(f"No example in the language of this page's models ({read or '?'}).")
        typed = {}
        for f in self.fields:
            key = f"{self.key}_{f.name}"
            if f.height is None:
                typed[f.name] = st.text_input(f.label, key=key)
            else:
                typed[f.name] = st.text_area(f.label, key=key, height=f.height)
        return typed

    def _set_example(self, offered: list[Example]) -> None:
        picked = st.session_state[f"{self.key}_example"]
        self._fill(next(e.values for e in offered if e.label == picked))

    def _fill(self, values: dict[str, str]) -> None:
        for f in self.fields:
            st.session_state[f"{self.key}_{f.name}"] = values.get(f.name, "")

    def _warm_up(self, language: str | None) -> Iterator[dict[str, tf.Tensor]]:
        example = next((e for e in self.examples if e.language == language), self.examples[0])
        for typed in self.warm_up_values(example.values):
            yield self.inputs(self.validate(typed)[0])

    def _answer(self, name: str, reason: str, path: Path, values: dict[str, Any]) -> Answer:
        meta, card = model_info(path)
        language = model_language(path)
        model = load_saved_model(str(path), self._warm_up(language))
        inputs = self.inputs(values)
        start = time.perf_counter()
        result = model.signatures["serving_default"](**inputs)
        latency_ms = 1000 * (time.perf_counter() - start)
        packed = {k: v.numpy() for k, v in model.signatures["tokenize"](**inputs).items()}
        return Answer(
            name=name,
            reason=reason,
            language=language,
            meta=meta,
            card=card,
            values=values,
            result={k: v.numpy() for k, v in result.items()},
            packed=packed,
            latency_ms=latency_ms,
            pieces=real_pieces(packed),
        )

    def _show_card(self, answer: Answer) -> None:
        st.sidebar.subheader("Model card")
        summary = self.card_summary(answer)
        line = f"**{answer.name}** · language: {answer.language or '?'}"
        st.sidebar.markdown(line + (f" · {summary}" if summary else ""))
        if not answer.card:
            st.sidebar.caption(
                f"tokenizer: {answer.meta.get('tokenizer')} · max_seq_length "
                f"{answer.meta.get('max_seq_length')} · no model card was exported with this model"
            )
            return
        self.show_card(answer)
