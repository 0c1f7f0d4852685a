"""Ranks sharing one NEFF cache (``core/compilation/CompilationCache.cpp:517-553``): the rank that
takes the lock shows ``compiled``, the others a 0 s ``disk_hit`` after waiting for its build. A
merged log attributes the wait to that build (same key), and a budget counts the NEFF once:
the same answer whichever rank won the lock. Events are written as the Neuron source resolves
them (``metrics["neff_keys"]``: the graphs' cache keys)."""
from __future__ import annotations

import pytest

from neuronkit.apps.budget import CompileBudget
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.rank_logs import merge_logs
from neuronkit.log.shared_cache import waited_for
from neuronkit.workloads.neff_builds import neff_counts, neff_lines

KEY = "ab" * 32 + "_trn2_1_O2_"


def event(state: str, started_at: float, neff_s: float = 0.0, duration_s: float = 1.0,
          **metrics) -> CompileEvent:
    return CompileEvent(kind="first", function="forward", backend="neuron", device="neuron:0",
                        started_at=started_at, duration_s=duration_s, neff_cache=state,
                        neff_compile_s=neff_s,
                        metrics={"neuron_graphs": [0, 0, 1], "neff_keys": [KEY], **metrics})


def write(path, rank: int, *events: CompileEvent, host: str | None = None):
    header = {**CompileLog().header, "rank": rank, **({"host": host} if host else {})}
    log = CompileLog(header=header, path=path)
    for e in events:
        log.append(e)
    log.release()
    return path


def two_ranks(tmp_path, winner: int, waiter_start: float = 10.5, hosts=(None, None)):
    """Rank ``winner`` built the NEFF (started 10.0, a 60 s build); the other read it from disk."""
    starts = {winner: 10.0, 1 - winner: waiter_start}
    paths = [write(tmp_path / f"c.rank{r}.jsonl", r,
                   event("compiled", starts[r], 60.0) if r == winner
                   else event("disk_hit", starts[r]), host=hosts[r]) for r in (0, 1)]
    return merge_logs(paths)


def budget_over(events: list[CompileEvent], limit: int) -> CompileBudget:
    budget = CompileBudget(max_neff_builds=limit)
    budget.log = CompileLog(events)   # a budget's events after its block: here a merged log's
    return budget


@pytest.mark.parametrize("winner", [0, 1])
def test_the_waiting_rank_names_the_build_and_how_long_it_waited(tmp_path, winner):
    merged = two_ranks(tmp_path, winner, waiter_start=10.5 if winner == 0 else 9.5)
    builder = next(e for e in merged.events if e.rank == winner)
    waiter = next(e for e in merged.events if e.rank != winner)
    wait = waited_for(waiter)
    assert wait is not None and waited_for(builder) is None
    assert (wait["rank"], wait["seq"], wait["key"]) == (winner, builder.seq, KEY)
    # the build ended at 10.0 + 1.0 + 60.0; the waiter asked at its start + 1.0
    assert wait["wait_s"] == pytest.approx(71.0 - (waiter.started_at + 1.0))
    n = neff_counts(merged.events)
    assert (n.builds, n.waited, n.disk_hits) == (1, 1, 0)
    lines = neff_lines(merged.events)
    assert f"after waiting {wait['wait_s']:.1f} s for rank {winner}'s build of it" in lines
    assert "counted once" in lines


def test_a_budget_gives_the_same_answer_whichever_rank_won_the_lock(tmp_path):
    answers = []
    for winner, folder in ((0, tmp_path / "a"), (1, tmp_path / "b")):
        folder.mkdir()
        merged = two_ranks(folder, winner)
        whole, strict = budget_over(merged.events, 1), budget_over(merged.events, 0)
        per_rank = [neff_counts([e for e in merged.events if e.rank == r]).builds for r in (0, 1)]
        answers.append((whole.ok, whole.neff_builds, strict.exceeded, per_rank))
    assert answers[0] == answers[1] == (True, 1, ["1 NEFF build > max_neff_builds=0"], [1, 1])


def test_a_disk_hit_with_no_overlapping_build_did_not_wait(tmp_path):
    merged = two_ranks(tmp_path, 0, waiter_start=100.0)   # the build ended at 71.0
    waiter = next(e for e in merged.events if e.rank == 1)
    assert waited_for(waiter) is None
    assert neff_counts(merged.events).builds == 1
    assert neff_counts([waiter]).builds == 0 and neff_counts([waiter]).disk_hits == 1


def test_ranks_of_other_hosts_never_wait_on_each_others_lock(tmp_path):
    merged = two_ranks(tmp_path, 0, hosts=("node-a", "node-b"))
    assert all(waited_for(e) is None for e in merged.events)


def test_a_neff_built_on_two_hosts_counts_once(tmp_path):
    """The cache folder shared (NFS), the lock per node: both hosts built it."""
    paths = [write(tmp_path / f"c.rank{r}.jsonl", r, event("compiled", 10.0 + r, 60.0),
                   host=f"node-{r}") for r in (0, 1)]
    merged = merge_logs(paths)
    assert neff_counts(merged.events).builds == 1
    assert "the same NEFF as event 0 of rank 0, counted once" in neff_lines(merged.events)


def test_a_rank_that_built_a_key_twice_counts_twice(tmp_path):
    """Keys dedupe across ranks, not within one: a rebuilt NEFF was built again."""
    log = CompileLog([event("compiled", 10.0, 5.0), event("compiled", 50.0, 5.0)])
    assert neff_counts(log.events).builds == 2


def test_in_sync_mode_the_wait_lies_inside_the_waiters_dynamo_time(tmp_path):
    paths = [write(tmp_path / "c.rank0.jsonl", 0, event("compiled", 10.0, 60.0, duration_s=61.0,
                                                      neff_in_duration=True)),
             write(tmp_path / "c.rank1.jsonl", 1, event("disk_hit", 10.5, duration_s=60.7,
                                                      neff_in_duration=True))]
    merged = merge_logs(paths)
    wait = waited_for(next(e for e in merged.events if e.rank == 1))
    assert wait is not None and wait["in_duration"] is True
    assert wait["wait_s"] == pytest.approx(60.5)   # the build ended at 71.0, the waiter began at 10.5


def test_the_waits_survive_a_save_and_the_rank_logs_are_left_alone(tmp_path):
    logs = [CompileLog([event("compiled", 10.0, 60.0)], header={**CompileLog().header, "rank": 0}),
            CompileLog([event("disk_hit", 10.5)], header={**CompileLog().header, "rank": 1})]
    merged = merge_logs(logs)
    assert waited_for(logs[1].events[0]) is None          # the rank's own log is not changed
    merged.save(tmp_path / "merged.jsonl")
    loaded = CompileLog.load(tmp_path / "merged.jsonl")
    assert [waited_for(e) is not None for e in loaded.events] == [False, True]


def test_the_report_shows_the_wait_and_counts_it_in_the_waiting_ranks_seconds(tmp_path):
    from neuronkit.views.report_facts import report_facts
    from neuronkit.views.text import format_events, format_summary

    merged = two_ranks(tmp_path, winner=0)
    waiter = next(e for e in merged.events if e.rank == 1)
    # rank 1's seconds: 1 s of Dynamo plus 59.5 s waiting under the lock (0 s of NEFF time)
    assert report_facts(CompileLog([waiter])).busiest == (1, pytest.approx(60.5))
    assert report_facts(merged).busiest == (0, pytest.approx(61.0))
    text = format_events(merged) + format_summary(merged)
    assert "waited 59.5 s for rank 0's build" in text
    from neuronkit.advice.diagnose import diagnose

    advice = next(a for a in diagnose(merged) if "NEFF builds" in a.title)
    assert "1 waited 59.5 s in all under the lock" in advice.detail
