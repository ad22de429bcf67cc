"""Go durations (objects/go_duration.py): read, and written back as Go writes them."""

from __future__ import annotations

from batchsched.objects.go_duration import format_go_duration, go_duration_seconds


def test_written_to_the_second_in_hours_minutes_and_seconds() -> None:
    assert format_go_duration(600) == "10m"
    assert format_go_duration(90) == "1m30s"
    assert format_go_duration(5400) == "1h30m"
    assert format_go_duration(3601) == "1h1s"
    assert format_go_duration(0) == "0s"


def test_what_is_written_reads_back() -> None:
    for seconds in (1, 59, 60, 3600, 3661, 86400):
        assert go_duration_seconds(format_go_duration(seconds)) == seconds
