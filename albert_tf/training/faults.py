"""Deterministic fault injection for recovery tests: ``ALBERT_TF_FAULTS``.

The ``pretrain`` command reads the environment variable ``ALBERT_TF_FAULTS``
and passes it down as `PretrainingOptions.faults`; library code never reads
the environment. A spec is comma-separated ``NAME:STEP`` items:

``nonfinite_at_step:N``
    the first attempt at optimizer step N gets an infinite loss (once).
``nonfinite_from_step:N``
    every attempt from step N on gets an infinite loss.

Steps count from 1: step N is the update that moves the global step from
N - 1 to N.

>>> faults = Faults("nonfinite_at_step:3")
>>> [faults.nonfinite(step) for step in (2, 3, 3)]
[False, True, False]
>>> Faults("nonfinite_from_step:2").nonfinite(5)
True
>>> Faults("explode:3")
Traceback (most recent call last):
...
ValueError: unknown fault 'explode' in ALBERT_TF_FAULTS='explode:3'; known: \
nonfinite_at_step, nonfinite_from_step
"""

from __future__ import annotations

#: The environment variable the ``pretrain`` command reads the spec from.
ENV_VAR = "ALBERT_TF_FAULTS"
KNOWN = ("nonfinite_at_step", "nonfinite_from_step")


class Faults:
    """A parsed fault spec; each ``*_at_step`` fault fires once."""

    def __init__(self, spec: str | None):
        self.spec = spec or ""
        self._pending: dict[str, set[int]] = {name: set() for name in KNOWN}
        for item in filter(None, (part.strip() for part in self.spec.split(","))):
            name, _, step = item.partition(":")
            if name not in KNOWN:
                raise ValueError(
                    f"unknown fault {name!r} in {ENV_VAR}={self.spec!r}; known: {', '.join(KNOWN)}"
                )
            if not step.isdigit() or int(step) < 1:
                raise ValueError(f"{ENV_VAR}: {item!r} needs a step >= 1, as in {name}:3")
            self._pending[name].add(int(step))

    def __bool__(self) -> bool:
        return any(self._pending.values())

    @property
    def injects_nonfinite(self) -> bool:
        return bool(self._pending["nonfinite_at_step"] or self._pending["nonfinite_from_step"])

    def nonfinite(self, step: int) -> bool:
        """Whether the attempt at optimizer step ``step`` gets an infinite loss."""
        if step in self._pending["nonfinite_at_step"]:
            self._pending["nonfinite_at_step"].discard(step)
            return True
        return any(step >= start for start in self._pending["nonfinite_from_step"])
