"""Client-side token bucket, as client-go's: `qps` tokens a second, up to `burst` at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(burst, 1)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = clock()

    @classmethod
    def unlimited(cls) -> TokenBucket:
        return cls(0.0, 1)

    @property
    def limited(self) -> bool:
        return self.qps > 0

    def acquire(self) -> None:
        """Take one token, waiting for it if the bucket is empty."""
        if not self.limited:
            return
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            # Reserve the token now and wait outside the lock: callers queue up in order.
            self._tokens -= 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
