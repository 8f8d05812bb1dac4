"""What one preparation (or one task of it) wrote: counts, skips, shard paths."""

from __future__ import annotations

import collections
import dataclasses


@dataclasses.dataclass
class WriteSummary:
    """What a preparation (or one of its tasks) did; tasks' summaries `merge`."""

    documents: int = 0
    sentences: int = 0
    examples: int = 0
    label_counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    notes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    shards: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    tasks: int = 0
    resumed_tasks: int = 0

    def merge(self, other: WriteSummary) -> None:
        """Adds the counts of one task."""
        self.documents += other.documents
        self.sentences += other.sentences
        self.examples += other.examples
        self.label_counts.update(other.label_counts)
        self.skipped.update(other.skipped)
        self.notes.update(other.notes)

    def to_state(self) -> dict:
        """The counts of one task, for its done marker (`from_state` reads it)."""
        return {
            "documents": self.documents,
            "sentences": self.sentences,
            "examples": self.examples,
            "label_counts": {str(k): v for k, v in self.label_counts.items()},
            "skipped": dict(self.skipped),
            "notes": dict(self.notes),
        }

    @classmethod
    def from_state(cls, state: dict) -> WriteSummary:
        return cls(
            documents=state["documents"],
            sentences=state["sentences"],
            examples=state["examples"],
            label_counts=collections.Counter({int(k): v for k, v in state["label_counts"].items()}),
            skipped=collections.Counter(state["skipped"]),
            notes=collections.Counter(state["notes"]),
        )

    def to_dict(self) -> dict:
        return {
            "documents": self.documents,
            "sentences": self.sentences,
            "examples": self.examples,
            "label_counts": {str(k): v for k, v in sorted(self.label_counts.items())},
            "skipped": dict(sorted(self.skipped.items())),
            "notes": dict(sorted(self.notes.items())),
            "num_shards": len(self.shards),
            "tasks": self.tasks,
            "resumed_tasks": self.resumed_tasks,
            "seconds": round(self.seconds, 2),
        }

    def report(self) -> str:
        lines = [
            f"documents read:   {self.documents}",
            f"sentences read:   {self.sentences}",
            f"examples written: {self.examples} in {len(self.shards)} shards",
            f"sentence labels:  {dict(sorted(self.label_counts.items()))}",
        ]
        if self.skipped:
            lines += [f"skipped ({k}): {v}" for k, v in sorted(self.skipped.items())]
        else:
            lines.append("skipped: none")
        lines += [f"note ({k}): {v}" for k, v in sorted(self.notes.items())]
        if self.resumed_tasks:
            lines.append(f"resumed: {self.resumed_tasks} of {self.tasks} tasks were done before")
        lines.append(f"time: {self.seconds:.1f}s")
        return "\n".join(lines)
