"""Reading ahead of a loop (``stereo3d.io.pipes.read_ahead``): what the NVDS stage's inputs go through while the
network runs. The items arrive in order, an error arrives after the items made before it, and a loop that stops
early leaves no thread behind."""

from __future__ import annotations

import threading
from contextlib import closing

import pytest

from stereo3d.io.pipes import read_ahead


def test_items_arrive_in_order_and_are_made_on_another_thread():
    makers = []

    def items():
        for n in range(50):
            makers.append(threading.current_thread().name)
            yield n

    assert list(read_ahead(items(), count=3)) == list(range(50))
    assert set(makers) == {"read-ahead"}


def test_an_error_arrives_after_the_items_made_before_it():
    def items():
        yield from range(5)
        raise OSError("the depth store is damaged at frame 5")

    got = []
    with pytest.raises(OSError, match="frame 5"):
        for item in read_ahead(items()):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_a_loop_that_stops_early_stops_the_thread():
    made = []

    def endless():
        n = 0
        while True:
            made.append(n)
            yield n
            n += 1

    with closing(read_ahead(endless(), count=2)) as ready:
        for item in ready:
            if item == 3:
                break
    assert not any(t.name == "read-ahead" and t.is_alive() for t in threading.enumerate())
    assert len(made) <= 3 + 1 + 2 + 1  # the items taken, the one being put and those queued: never the whole stream
