"""Where things are, found from this file: a test's own depth under tests/ then does not
matter when it moves."""

from pathlib import Path

#: The tests/ folder.
TESTS = Path(__file__).resolve().parents[1]
#: The repository's root (pyproject.toml, configs/, apps/, albert_tf/).
REPO = TESTS.parent
#: The shared real data beside the checkout (../shared/data; tests skip without it).
SHARED_DATA = REPO.parent / "shared" / "data"
