"""The report's charts drawn from small aggregates (no Spark): each PNG shows its data, and its
axes span the data rather than matplotlib's defaults."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from chart_reading import axis_ranges, data_pixels
from matplotlib import dates

from rmqc.pipeline import _report
from rmqc.pipeline._report import ReportData, write_report
from rmqc.pipeline._run import FailoverStats, FlappingRecord, Summary

HOUR_MS = 3_600_000
START_MS = 1_767_225_600_000  # 2026-01-01T00:00Z


def _summary(top: tuple[FlappingRecord, ...]) -> Summary:
    return Summary(out_dir="", report_path="", rows=9, controller_clusters=1, groups=1, elections=3,
                   failovers=FailoverStats(2, 2, 2, 150.0, 9000.0, 9000.0, 9000),
                   violation_counts={}, violations=(), top_flapping=top, linearizability=None,
                   elapsed_s=1.0)  # fmt: skip


def _day(ms: int) -> float:
    return dates.date2num(datetime.fromtimestamp(ms / 1000, UTC))


@pytest.fixture
def short_history_report(tmp_path):
    """Less than an hour of history: three elections in one hour, one group."""
    data = ReportData(
        failover_buckets=[(10 ** (8 / 4), 1), (10 ** (15 / 4), 1)],  # 100 ms and 5.6 s buckets
        elections_per_hour=[(START_MS, 3)],
        timeline_group=("c", "b"),
        timeline=[(START_MS + 60_000, 1, 1), (START_MS + 70_000, None, 2), (START_MS + 80_000, 2, 3)],
        audit_counts=[], audit_rows=[],
    )  # fmt: skip
    top = (FlappingRecord(1, "c", "b", 3, 2, 3, 3.0),)
    write_report(tmp_path, _summary(top), data)
    return tmp_path


def test_elections_per_hour_spans_the_history_not_years(short_history_report):
    png = short_history_report / "elections_per_hour.png"
    (x_low, x_high), (y_low, y_high) = axis_ranges(png)
    assert _day(START_MS - 2 * HOUR_MS) <= x_low <= _day(START_MS)
    assert _day(START_MS + HOUR_MS) <= x_high <= _day(START_MS + 3 * HOUR_MS)
    assert y_low == 0 and y_high >= 3
    assert data_pixels(png, _report.ELECTIONS_COLOR) > 20  # one marker


def test_failover_durations_on_a_log_scale(short_history_report):
    png = short_history_report / "failover_durations.png"
    (x_low, x_high), _ = axis_ranges(png)
    assert 10 <= x_low <= 100 and 5623 <= x_high <= 100_000
    assert data_pixels(png, _report.FAILOVER_COLOR) > 200
    assert "(failover_durations.png)" in (short_history_report / "report.md").read_text()


def test_flapping_groups_chart(short_history_report):
    png = short_history_report / "flapping_groups.png"
    (x_low, x_high), _ = axis_ranges(png)
    assert x_low == 0 and 3 <= x_high <= 4
    assert data_pixels(png, _report.FLAPPING_COLOR) > 1000


def test_timeline_of_the_top_group_spans_its_elections(short_history_report):
    png = short_history_report / "timeline_top_group.png"
    (x_low, x_high), (y_low, y_high) = axis_ranges(png)
    assert _day(START_MS + 60_000) - 1 / 24 < x_low <= _day(START_MS + 60_000)
    assert _day(START_MS + 80_000) <= x_high < _day(START_MS + 80_000) + 1 / 24
    assert y_low <= 0 and y_high >= 2
    assert data_pixels(png, _report.MASTER_COLOR) > 20


def test_a_single_election_is_still_drawn(tmp_path):
    data = ReportData([], [(START_MS, 1)], ("c", "b"), [(START_MS + 5, 1, 1)], [], [])
    write_report(tmp_path, _summary(()), data)
    assert data_pixels(tmp_path / "timeline_top_group.png", _report.MASTER_COLOR) > 5
    (x_low, x_high), _ = axis_ranges(tmp_path / "timeline_top_group.png")
    assert x_high - x_low == pytest.approx(timedelta(minutes=1) / timedelta(days=1))


def test_tick_labels_are_plain_numbers_and_whole_where_the_data_is_whole():
    """A 0 ms failover is drawn in the 1 ms bucket: the log axis then spans about 1-1.8 ms, which
    matplotlib labelled 1.1x10^0 ...; epochs and counts over a small range got 0.5 ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (log_ax, count_ax) = plt.subplots(1, 2)
    log_ax.bar([1.0], [1], width=[0.78], align="edge")
    log_ax.set_xscale("log")
    _report._plain_log_ticks(log_ax.xaxis)
    count_ax.plot([0, 1], [1, 2])
    _report._integer_ticks(count_ax.yaxis)
    fig.canvas.draw()
    labels = [t.get_text() for t in log_ax.get_xticklabels(which="both") if t.get_text()]
    assert labels and not any("times" in text or "^" in text for text in labels), labels
    assert all(float(tick) == int(tick) for tick in count_ax.get_yticks()), count_ax.get_yticks()
    plt.close(fig)
