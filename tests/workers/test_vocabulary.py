"""The shared words (workers/vocabulary.py): statuses, and the "did you mean" hint."""

from workers.vocabulary import RECORDED_STATUSES, STATUSES, did_you_mean


def test_statuses_and_the_ones_a_rerun_does_not_repeat():
    assert STATUSES == ("ok", "diverged", "oom", "error", "pruned")
    assert set(STATUSES) - set(RECORDED_STATUSES) == {"error"}


def test_did_you_mean_names_the_closest_known_names_first():
    assert did_you_mean("num_head", ["depth", "num_heads", "num_kv_heads"]) == "did you mean num_heads, num_kv_heads? "
    assert did_you_mean("zzz", ["depth", "num_heads"]) == ""
    assert did_you_mean("dpth", ["depth", "dept", "seeds"], n=1) == "did you mean depth? "
