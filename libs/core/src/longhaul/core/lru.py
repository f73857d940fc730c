"""A bounded least-recently-used map: what a service remembers to save round trips.

It only ever saves round trips (a folded state a repository caches, which task a step trace
belongs to); anything evicted or never seen is read from the log again, so its size is a
speed knob, not a correctness one.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def peek(self, key: K) -> V | None:
        """The value, without counting as a use."""
        return self._items.get(key)

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)
