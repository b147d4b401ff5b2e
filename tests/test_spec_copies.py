"""The spec files the tests replay are copies of the shared spec; keep them in step.

CI runs in a fresh clone with the shared folder beside it (`../shared`); where it is absent (a
checkout on its own) the copies are all there is, and this test says so instead of failing.
"""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_SPEC = REPO.parent / "shared" / "spec"
COPIES = ["java-scenarios.json", "golden-frames.json"]


@pytest.mark.parametrize("name", COPIES)
def test_spec_copy_matches_shared_spec(name: str) -> None:
    shared = SHARED_SPEC / name
    if not shared.exists():
        pytest.skip(f"no shared spec beside the repo at {SHARED_SPEC}; using the copy in tests/spec")
    assert (REPO / "tests" / "spec" / name).read_bytes() == shared.read_bytes(), (
        f"tests/spec/{name} differs from {shared}: copy the shared file over"
    )
