"""What a comparison over seeds may claim: a warning below 5 seeds, intervals within what a
count or a share can be, a verdict per metric at the top of the report, readable wait ticks,
and one name per metric in text, report and CSV."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.sim import aggregate, report
from batchsched.sim.stats import Interval, few_seeds
from tests.sim.test_runs import SCENARIO


def _simulate(tmp_path: Path, *extra: str) -> int:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return main(["simulate", str(path), "--until", "2h", "--jobs", "1", *extra])


def test_fewer_than_5_seeds_are_said_to_make_intervals_weak() -> None:
    assert "3 seeds: the 95% intervals are too wide" in few_seeds(3, 2)
    assert "t is 4.30 at 3 seeds, 2.78 at 5" in few_seeds(3, 1)
    assert "one seed" in few_seeds(1, 2) and "--seeds 5 or more" in few_seeds(1, 2)
    assert few_seeds(1, 1) == ""  # one run on one seed compares nothing
    assert few_seeds(5, 2) == few_seeds(8, 3) == ""


def test_the_report_opens_with_the_warning_and_a_verdict_per_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _simulate(tmp_path, "--seeds", "2", "--report", str(tmp_path / "r")) == 0
    out, err = capsys.readouterr()
    # The legend says how a clipped interval reads, in the terminal and on the page.
    legend = "mean [low, high] where what the metric can be (a count never below 0"
    assert legend in " ".join(out.split())
    assert "warning: 2 seeds: the 95% intervals are too wide to mean much" in err
    page = (tmp_path / "r" / "report.html").read_text()
    assert legend in " ".join(page.split())
    body = page[page.index("<h1>") :]
    assert re.findall(r"<h2>([^<]+)</h2>", body)[0] == "Verdict"
    verdict = body[body.index("<h2>Verdict</h2>") : body.index("<table>")]
    paragraphs = re.findall(r"<p>(.*?)</p>", verdict)
    assert paragraphs[0].startswith("<strong>Warning:</strong> 2 seeds:")
    summary = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    metrics = list(summary["comparison"]["metrics"])
    assert [p.split(":")[0] for p in paragraphs[1:]] == [m.split(":")[0] for m in metrics]
    said = " ".join(paragraphs[1:])
    assert "tolerant gives" in said and "against plain&#x27;s" in said
    assert "seed noise" in said or "the same on every seed" in said


class _Seed(dict):  # type: ignore[type-arg]
    """A fake run result: its summary (run_summary is replaced by the identity), and the seed
    compare() records."""

    def __init__(self, seed: int, preemptions: float, gpu_share: float) -> None:
        super().__init__(
            jobs={"finished": 1, "submitted": 1},
            cluster={
                "utilisation": {"nvidia.com/gpu": gpu_share},
                "gang_start_delay_seconds": {"p95": None},
                "gpu_fragmentation": {"mean": 0.0},
                "whole_node_gpu_wait_seconds": {"mean": None},
            },
            preemptions=preemptions,
            no_progress_preemptions=0,
            lost_gpu_hours=0.0,
            preemptors={"wait_seconds": {"mean": None, "p95": None}, "held_by_toleration_jobs": 0},
            classes={},
            backfill={
                "jobs_by_size": {},  # no GPU job of any size: no per-size metric
                "backfilled_jobs": 0,
                "reserved_jobs": 0,
                "start_error_abs_seconds": {"mean": None},
            },
        )
        self.seed = seed


def test_intervals_of_counts_and_shares_stay_within_their_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aggregate, "run_summary", lambda result: result)
    a = [_Seed(0, 0, 0.99), _Seed(1, 0, 1.0), _Seed(2, 3, 0.95)]  # t: below 0, above 100%
    b = [_Seed(0, 0, 1.0), _Seed(1, 0, 1.0), _Seed(2, 0, 1.0)]
    comparison = aggregate.compare({"a": a, "b": b})  # type: ignore[dict-item]
    preemptions = comparison.means["preemptions"]["a"]
    assert preemptions is not None and preemptions.mean == 1.0 and preemptions.low == 0.0
    assert preemptions.high > 5.0  # the upper side keeps Student's t (4.30 x 1)
    util = comparison.means["GPU util %"]["a"]
    assert util is not None and util.high == 100.0 and util.low < 98.0
    # b - a: b's preemptions are 0 on every seed, so the mean difference is at least -1.
    diff = comparison.differences["preemptions"]["b"]
    assert diff is not None and diff.mean == -1.0 and diff.low == -1.0
    # GPU share: b - a is at most 100 minus a's mean (98).
    share = comparison.differences["GPU util %"]["b"]
    assert share is not None and share.high == pytest.approx(2.0)
    assert aggregate.cell(preemptions) == "1.0 [0.0, 5.3]"
    assert aggregate.cell(Interval(2.0, 1.0, 3.0, 3)) == "2.0 ± 1.0"


def test_one_name_for_no_progress_preemptions_in_text_report_and_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _simulate(tmp_path, "--report", str(tmp_path / "r")) == 0
    out = capsys.readouterr().out
    page = (tmp_path / "r" / "report.html").read_text()
    with (tmp_path / "r" / "jobs.csv").open() as handle:
        header = next(csv.reader(handle))
    summary = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    text = " ".join(out.split())
    assert "NO-PROGRESS" in text and "no-progress preemptions" in page
    assert "no_progress_preemptions" in header
    assert "no_progress_preemptions" in summary["runs"][0]
    for shown in (text, page, ",".join(header), orjson.dumps(summary).decode()):
        assert "fruitless" not in shown
        assert not re.search(r"(?<!-)\bno progress\b", shown.replace("no-progress", ""))


@dataclass
class _Job:
    group: str
    wait: float | None


@dataclass
class _Result:
    name: str
    jobs: list[_Job]


@pytest.mark.parametrize(
    ("waits", "labels"),
    [
        ([0.0, 10.0, 35.0], ["0", "15 s", "30 s", "45 s"]),
        ([0.0, 30.0, 400.0, 5000.0, 30000.0], ["0", "1 min", "10 min", "1 h", "10 h"]),
        ([0.0, 90000.0], ["0", "1 min", "10 min", "1 h", "10 h", "1 d", "1 w"]),
    ],
)
def test_the_wait_plot_labels_its_ticks_in_words(waits: list[float], labels: list[str]) -> None:
    """matplotlib's own ticks on a symlog axis read `-2.83×10^-2` for waits under a minute."""
    results = [_Result("a", [_Job("low", w) for w in waits])]
    figure = report.wait_cdf(results, ["low"])  # type: ignore[arg-type]
    figure.canvas.draw()
    [axis] = figure.axes
    shown = [t.get_text() for t in axis.get_xticklabels()]
    assert shown == labels
    assert not axis.xaxis.get_minorticklabels() or all(
        not t.get_text() for t in axis.xaxis.get_minorticklabels()
    )


def test_a_verdict_says_what_changed_and_whether_seeds_can_tell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aggregate, "run_summary", lambda result: result)
    a = [_Seed(i, 10 + i, 0.5) for i in range(5)]
    b = [_Seed(i, i, 0.5) for i in range(5)]  # 10 fewer preemptions on every seed
    said = {
        v.split(":")[0]: v
        for v in aggregate.verdicts(aggregate.compare({"a": a, "b": b}))  # type: ignore[dict-item]
    }
    assert said["preemptions"] == (
        "preemptions: b gives 2.0 against a's 12.0: less by 10.0 on average over 5 paired "
        "seeds (95% interval -10.0 to -10.0), a difference beyond seed noise."
    )
    assert (
        said["GPU util %"] == "GPU util %: b gives 50.0 against a's 50.0: the same on every seed."
    )
    assert said["gang start delay p95 (min)"].endswith(
        "not measured in b nor in a (nothing of the kind ran)."
    )
