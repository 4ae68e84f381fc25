"""An unstable sort that leaves equal keys in the same order as Go's
``slices.SortFunc`` (pattern-defeating quicksort).

Go's reader sorts two things with that unstable sort: the CPU samples of a
generation and, on its rare fallback path, the per-thread frontier. When
keys tie, the order Go ends up with decides which event comes first, so a
stable Python sort is not enough to reproduce it. The algorithm here follows
the published pdqsort scheme with the same parameters Go uses (insertion
sort up to 12 elements, median-of-three / ninther pivots, pattern breaking
with a length-seeded xorshift, heapsort fallback), so it makes the same
moves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_M64 = (1 << 64) - 1


class _Sorter:
    __slots__ = ("k", "v")

    def __init__(self, keys: list[int], vals: list[Any]) -> None:
        self.k = keys
        self.v = vals

    def swap(self, i: int, j: int) -> None:
        k, v = self.k, self.v
        k[i], k[j] = k[j], k[i]
        v[i], v[j] = v[j], v[i]

    def less(self, i: int, j: int) -> bool:
        return self.k[i] < self.k[j]

    def insertion(self, a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and self.less(j, j - 1):
                self.swap(j, j - 1)
                j -= 1

    def _sift(self, lo: int, hi: int, first: int) -> None:
        root = lo
        while True:
            child = 2 * root + 1
            if child >= hi:
                return
            if child + 1 < hi and self.less(first + child, first + child + 1):
                child += 1
            if not self.less(first + root, first + child):
                return
            self.swap(first + root, first + child)
            root = child

    def heapsort(self, a: int, b: int) -> None:
        n = b - a
        for i in range((n - 1) // 2, -1, -1):
            self._sift(i, n, a)
        for i in range(n - 1, -1, -1):
            self.swap(a, a + i)
            self._sift(0, i, a)

    def partition(self, a: int, b: int, pivot: int) -> tuple[int, bool]:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while i <= j and self.less(i, a):
            i += 1
        while i <= j and not self.less(j, a):
            j -= 1
        if i > j:
            self.swap(j, a)
            return j, True
        self.swap(i, j)
        i += 1
        j -= 1
        while True:
            while i <= j and self.less(i, a):
                i += 1
            while i <= j and not self.less(j, a):
                j -= 1
            if i > j:
                break
            self.swap(i, j)
            i += 1
            j -= 1
        self.swap(j, a)
        return j, False

    def partition_equal(self, a: int, b: int, pivot: int) -> int:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while True:
            while i <= j and not self.less(a, i):
                i += 1
            while i <= j and self.less(a, j):
                j -= 1
            if i > j:
                return i
            self.swap(i, j)
            i += 1
            j -= 1

    def partial_insertion(self, a: int, b: int) -> bool:
        i = a + 1
        for _ in range(5):
            while i < b and not self.less(i, i - 1):
                i += 1
            if i == b:
                return True
            if b - a < 50:
                return False
            self.swap(i, i - 1)
            if i - a >= 2:
                j = i - 1
                while j >= 1 and self.less(j, j - 1):
                    self.swap(j, j - 1)
                    j -= 1
            if b - i >= 2:
                j = i + 1
                while j < b and self.less(j, j - 1):
                    self.swap(j, j - 1)
                    j += 1
        return False

    def break_patterns(self, a: int, b: int) -> None:
        n = b - a
        if n < 8:
            return
        r = n
        mod = 1 << n.bit_length()
        mid = a + (n // 4) * 2
        for idx in range(mid - 1, mid + 2):
            r ^= (r << 13) & _M64
            r ^= r >> 7
            r ^= (r << 17) & _M64
            other = r & (mod - 1)
            if other >= n:
                other -= n
            self.swap(idx, a + other)

    def _order2(self, x: int, y: int, sw: list[int]) -> tuple[int, int]:
        if self.less(y, x):
            sw[0] += 1
            return y, x
        return x, y

    def _median(self, x: int, y: int, z: int, sw: list[int]) -> int:
        x, y = self._order2(x, y, sw)
        y, z = self._order2(y, z, sw)
        x, y = self._order2(x, y, sw)
        return y

    def choose_pivot(self, a: int, b: int) -> tuple[int, int]:
        """(pivot, hint) with hint 0 unknown, 1 increasing, 2 decreasing."""
        n = b - a
        sw = [0]
        i, j, k = a + n // 4, a + n // 4 * 2, a + n // 4 * 3
        if n >= 8:
            if n >= 50:
                i = self._median(i - 1, i, i + 1, sw)
                j = self._median(j - 1, j, j + 1, sw)
                k = self._median(k - 1, k, k + 1, sw)
            j = self._median(i, j, k, sw)
        if sw[0] == 0:
            return j, 1
        if sw[0] == 12:
            return j, 2
        return j, 0

    def sort(self, a: int, b: int, limit: int) -> None:
        balanced = True
        partitioned = True
        while True:
            n = b - a
            if n <= 12:
                self.insertion(a, b)
                return
            if limit == 0:
                self.heapsort(a, b)
                return
            if not balanced:
                self.break_patterns(a, b)
                limit -= 1
            pivot, hint = self.choose_pivot(a, b)
            if hint == 2:
                i, j = a, b - 1
                while i < j:
                    self.swap(i, j)
                    i += 1
                    j -= 1
                pivot = (b - 1) - (pivot - a)
                hint = 1
            if balanced and partitioned and hint == 1:
                if self.partial_insertion(a, b):
                    return
            if a > 0 and not self.less(a - 1, pivot):
                a = self.partition_equal(a, b, pivot)
                continue
            mid, partitioned = self.partition(a, b, pivot)
            left, right = mid - a, b - mid
            threshold = n // 8
            if left < right:
                balanced = left >= threshold
                self.sort(a, mid, limit)
                a = mid + 1
            else:
                balanced = right >= threshold
                self.sort(mid + 1, b, limit)
                b = mid


def go_sort(items: list[Any], key: Callable[[Any], int]) -> None:
    """Sort ``items`` in place by ``key`` leaving ties as Go's SortFunc does."""
    n = len(items)
    if n <= 12:
        items.sort(key=key)  # Go uses insertion sort here, which is stable
        return
    keys = [key(x) for x in items]
    if len(set(keys)) == n:
        # Without ties every correct sort gives Go's order: use the fast one.
        items.sort(key=key)
        return
    _Sorter(keys, items).sort(0, n, n.bit_length())
