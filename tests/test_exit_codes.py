"""The one exit-status rule (exit_codes.of_run): what a session, a merge of shards and a run
against the base exit with (milliseconds, no process)."""

from __future__ import annotations

import pytest

from pytest_concurrency.exit_codes import Exit, gates_failed, of_run

pytestmark = pytest.mark.once


@pytest.mark.parametrize("given", [Exit.INTERRUPTED, Exit.INTERNAL_ERROR, Exit.USAGE_ERROR, 6])
def test_a_status_that_ended_the_tests_early_stands_whatever_the_gate_found(given):
    assert of_run(given, failed=True, nothing_judged=True, undecided=True) == given


def test_a_failure_wins_then_nothing_judged_then_rerecord_then_undecided():
    found = dict(failed=True, nothing_judged=True, rerecord=True, undecided=True)
    for status in (Exit.TESTS_FAILED, Exit.NOTHING_JUDGED, Exit.RERECORD_BASELINE):
        assert of_run(Exit.OK, **found) == status
        found.pop(next(iter(found)))
    assert of_run(Exit.OK, **found) == Exit.UNDECIDED
    assert of_run(Exit.OK) == Exit.OK


def test_a_status_of_the_rule_given_counts_as_what_it_says():
    """A shard's or the head's session's own status, itself of this rule: the head's 8 (nothing
    judged against its own baseline) gives way to a regression against the base, its 7 does not
    give way to undecided."""
    assert of_run(Exit.NOTHING_JUDGED, failed=True) == Exit.TESTS_FAILED
    assert of_run(Exit.RERECORD_BASELINE, undecided=True) == Exit.RERECORD_BASELINE
    assert of_run(Exit.TESTS_FAILED) == Exit.TESTS_FAILED
    assert of_run(Exit.NO_TESTS_COLLECTED) == Exit.NO_TESTS_COLLECTED
    assert of_run(Exit.NO_TESTS_COLLECTED, nothing_judged=True) == Exit.NOTHING_JUDGED


def test_a_judgement_fails_its_run_on_a_regression_or_a_leak_not_on_a_gate_not_run():
    from types import SimpleNamespace as judged

    assert not gates_failed(None, None)
    assert not gates_failed(judged(failed=False), judged(failed=False))
    assert gates_failed(judged(failed=True), None)
    assert gates_failed(None, judged(failed=True))
