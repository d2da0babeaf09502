"""Rows (engine/step_records.py): a WideNode's per-token norms as one flat array('d'), read as the tuple of row
tuples it replaced, stored by the job codec as a slice of its pool (app/engine/jobs/codec.py)."""
from __future__ import annotations

from array import array

import pytest

from app.engine.jobs import codec
from app.kinds.smollm.engine.step_records import Rows

TABLE = ((1.0, 2.5, -0.0), (3.0, float("inf"), 5e-324))


def test_rows_read_as_the_tuples_they_hold():
    rows = Rows.of(TABLE)
    assert len(rows) == 2 and rows.width == 3
    assert rows[0] == TABLE[0] and rows[-1] == TABLE[1] and rows[1][:2] == TABLE[1][:2]
    assert tuple(rows) == TABLE and rows[0:2] == TABLE and rows[::-1] == TABLE[::-1]
    assert rows.tolist() == [list(r) for r in TABLE]
    with pytest.raises(IndexError):
        rows[2]
    with pytest.raises(IndexError):
        rows[-3]
    assert Rows.of(()) == Rows(array("d"), 0) and len(Rows.of(())) == 0
    with pytest.raises(ValueError, match="unequal"):
        Rows.of(((1.0,), (1.0, 2.0)))


def test_rows_round_trip_through_the_job_codec_bit_for_bit():
    rows = Rows.of(TABLE)
    back = codec.loads(codec.dumps({"n": rows}), (Rows,))["n"]
    assert back == rows and type(back.flat) is array and back.flat.tobytes() == rows.flat.tobytes()
    assert str(back[0][2]) == "-0.0"
