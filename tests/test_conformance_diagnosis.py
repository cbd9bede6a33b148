"""The diagnosis's explanations, one by one, on slopes written out by hand (no model, no probe):
each explanation names its own case, and no explanation before it in EXPLANATIONS does (the
order is the rule: simplest first, the cause a config sets before a coincidence)."""

import numpy as np
import pytest
import torch

from alibi_viz.alibi import alibi_slopes
from alibi_viz.models import conformance_diagnosis as diagnosis
from alibi_viz.models.conformance_probe import thresholds

EXACT = thresholds(torch.float64, "sdpa")  # slopes given exactly: the tightest tolerances

CASES = {  # explanation -> (expected slopes, measured slopes, verdict, evidence it must give)
    "_explain_conforms": (alibi_slopes(8), alibi_slopes(8), "conforms", {}),
    "_explain_missing": (alibi_slopes(8), np.zeros(8), "missing", {}),
    "_explain_missing_shards": (alibi_slopes(8), np.r_[alibi_slopes(8)[:4], np.zeros(4)],
                                "missing", {"shards": 2, "missing_shards": [1]}),
    "_explain_partial": (alibi_slopes(8), np.r_[alibi_slopes(4), np.zeros(4)], "missing",
                         {"alibi_heads": 4}),
    "_explain_factor": (alibi_slopes(12), 2 * alibi_slopes(12), "scaled",
                        {"factor_name": "twice"}),
    "_explain_sign_and_more": (alibi_slopes(12), -alibi_slopes(12)[::-1], "sign_flipped",
                               {"inner": "permuted", "order": "reversed"}),
    "_explain_schedule": (alibi_slopes(8), alibi_slopes(8, "official", 4.0), "schedule",
                          {"max_bias": 4.0, "same_as_num_heads": 16}),
    "_explain_permuted": (alibi_slopes(8), alibi_slopes(8)[::-1], "permuted",
                          {"order": "reversed"}),
    "_explain_factor_on_top": (alibi_slopes(12), 0.5 * alibi_slopes(12, "geometric"),
                               "schedule", {"schedule": "geometric", "factor_name": "half"}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_explanation_names_its_case_and_none_before_it_does(name):
    """The explanation finds its case with its evidence; every explanation tried before it
    finds nothing; explain_slopes returns that explanation."""
    expected, measured, verdict, evidence = CASES[name]
    order = [f.__name__ for f in diagnosis.EXPLANATIONS]
    args = (np.asarray(measured, dtype=float), np.asarray(expected, dtype=float), 1.0, 8, EXACT,
            8.0)
    for earlier in diagnosis.EXPLANATIONS[:order.index(name)]:
        assert earlier(*args) is None, earlier.__name__
    found = getattr(diagnosis, name)(*args)
    assert found is not None and found[0] == verdict
    assert evidence.items() <= found[2].items(), found[2]
    whole = diagnosis.explain_slopes(*args[:5])
    assert whole[:3] == found[:3]
    np.testing.assert_array_equal(whole[3], found[3])


def test_max_bias_comes_before_the_head_count_it_coincides_with():
    """max_bias 4 at 8 heads is also "the first 8 slopes of the 16-head schedule": the
    schedules are tried max_bias first; the coincidence comes after it."""
    measured, expected = alibi_slopes(8, "official", 4.0), alibi_slopes(8)
    keys = [key for key, _e, _s in diagnosis._schedules(measured, expected, 1.0, EXACT, 8.0)]
    assert keys.index(("max_bias", 4.0)) < keys.index(("count", 16))
