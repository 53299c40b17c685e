"""The progress line of a run: bar, count, rate and ETA on a stream."""

from __future__ import annotations

import time
from typing import IO

__all__ = ["Progress"]


class Progress:
    """A plain-text progress line (bar, count, rate, ETA) on a stream."""

    def __init__(self, total: int, done: int, stream: IO[str], *, interval: float = 0.2) -> None:
        self.total, self.start_done, self.done = total, done, done
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = interval if self.tty else max(interval, 2.0)
        self.t0 = time.perf_counter()
        self.last = 0.0

    def tick(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.last >= self.interval:
            self.last = now
            self.show(now)

    def show(self, now: float, final: bool = False) -> None:
        elapsed = now - self.t0
        made = self.done - self.start_done
        rate = made / elapsed if elapsed > 0 else 0.0
        left = self.total - self.done
        eta = _clock(left / rate) if rate > 0 else "--:--:--"
        frac = self.done / self.total if self.total else 1.0
        width = 24
        filled = int(frac * width)
        bar = "#" * filled + "-" * (width - filled)
        line = (
            f"peira run [{bar}] {self.done}/{self.total} ({frac:.1%}) "
            f"{rate:,.1f} calls/s ETA {eta if not final else _clock(0)}"
        )
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        self.show(time.perf_counter(), final=True)


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
