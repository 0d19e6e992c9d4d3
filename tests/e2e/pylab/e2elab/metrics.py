"""The exporter's /metrics as the lab reads it: one scrape parsed by prometheus_client's own
exposition parser (`text_string_to_metric_families`), stamped with the wall-clock time right
before the request and right after the answer, and sampled in the background.

A series that is absent is `None`, never 0: "the exporter says nothing of it" and "the exporter
says 0" are different verdicts. `value` matches LABELS as a subset of a series' labels and
insists on one series; `exact` wants the whole label set; `values` lists every match.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")


class ScrapeFailed(Exception):
    pass


class AmbiguousSeries(Exception):
    pass


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    value: float


def _matches(labels: Mapping[str, str], want: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in want.items())


@dataclass(frozen=True)
class Scrape:
    t_before: float
    t_after: float
    series: tuple[Series, ...]

    @classmethod
    def parse(cls, text: str, t_before: float, t_after: float) -> Scrape:
        series = tuple(
            Series(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        )
        return cls(t_before, t_after, series)

    def values(self, name: str, /, **labels: str) -> list[Series]:
        """Every series NAME whose labels include LABELS."""
        return [s for s in self.series if s.name == name and _matches(s.labels, labels)]

    def value(self, name: str, /, **labels: str) -> float | None:
        """The value of the one series NAME whose labels include LABELS; None when there is
        none (absent is not 0), AmbiguousSeries when several match (name more labels)."""
        found = self.values(name, **labels)
        if len(found) > 1:
            raise AmbiguousSeries(f"{name}{labels}: {[dict(s.labels) for s in found]}")
        return found[0].value if found else None

    def exact(self, name: str, /, **labels: str) -> float | None:
        """The value of NAME{LABELS}, LABELS being its whole label set (lib.sh's metric_value
        without `,...`); None when absent."""
        found = [s for s in self.series if s.name == name and dict(s.labels) == labels]
        return found[0].value if found else None


def scrape(url: str, timeout_s: float = 5.0) -> Scrape:
    t_before = time.time()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            body = r.read(64 << 20).decode()
    except OSError as e:
        raise ScrapeFailed(f"{url}: {e}") from e
    return Scrape.parse(body, t_before, time.time())


class Sampler:
    """Scrapes URL every EVERY_S seconds in a thread of its own: `scrapes`, in order; `failures`
    counts the scrapes that got no answer."""

    def __init__(self, url: str, every_s: float) -> None:
        self.url = url
        self.every_s = every_s
        self.scrapes: list[Scrape] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sampler {url}", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.scrapes.append(scrape(self.url))
            except ScrapeFailed:
                self.failures += 1
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - started)))

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> list[Scrape]:
        self._stop.set()
        self._thread.join(30)
        return self.scrapes


@dataclass(frozen=True)
class Stamped(Generic[T]):
    """A reading and the wall-clock times right before it was asked for and right after it came."""
    t_before: float
    t_after: float
    value: T


def stamped(read: Callable[[], T]) -> Stamped[T]:
    t_before = time.time()
    value = read()
    return Stamped(t_before, time.time(), value)


def bracket(read_truth: Callable[[], T], read: Callable[[], Stamped[object] | object]
            ) -> tuple[Stamped[T], Stamped[object], Stamped[T]]:
    """Ground truth read right before and right after a reading: what was true while the
    reading was made lies between the two (each stamped with when it was read)."""
    before = stamped(read_truth)
    reading = stamped(read)
    after = stamped(read_truth)
    return before, reading, after


@dataclass
class TruthSampler(Generic[T]):
    """Reads a ground truth in the background (every EVERY_S), each reading stamped; `between`
    gives the bounds of what it was at any moment of an interval (as lib.sh's e2e_bracket)."""
    read: Callable[[], T]
    every_s: float = 0.1
    readings: list[Stamped[T]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TruthSampler[T]:
        def run() -> None:
            while not self._stop.is_set():
                try:
                    self.readings.append(stamped(self.read))
                except Exception:  # a failed reading is no reading; the bracket needs one on each side
                    pass
                self._stop.wait(self.every_s)
        self._thread = threading.Thread(target=run, name="truth sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def between(self, t_from: float, t_to: float) -> tuple[T, T] | None:
        """(the last reading made wholly before T_FROM, the first made wholly after T_TO), or
        None without one on either side."""
        low = [r for r in self.readings if r.t_after <= t_from]
        high = [r for r in self.readings if r.t_before >= t_to]
        if not low or not high:
            return None
        return low[-1].value, high[0].value


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float, every_s: float = 0.5) -> tuple[T, float]:
    """Calls PROBE every EVERY_S until it returns something other than None (or False); that and
    the seconds it took. TimeoutError naming WHAT and the last answer otherwise."""
    t0 = time.monotonic()
    last: T | None = None
    while True:
        try:
            last = probe()
        except (ScrapeFailed, OSError) as e:
            last = None
            err = str(e)
        else:
            err = ""
        if last is not None and last is not False:
            return last, time.monotonic() - t0
        if time.monotonic() - t0 >= timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s (last: {err or last!r})")
        time.sleep(every_s)
