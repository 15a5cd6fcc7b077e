"""pfl_theory.sample_stats.mean_sd: the sample (n − 1) standard deviation over finite values."""

import math

from pfl_theory.sample_stats import mean_sd


def test_mean_and_sample_sd_drop_missing_and_non_finite_values():
    m, sd, n = mean_sd([1.0, None, 3.0, float("nan"), float("inf")])
    # mutation: population sd (÷ n) gives 1.0; keeping nan gives nan
    assert (m, n) == (2.0, 2) and math.isclose(sd, math.sqrt(2.0))


def test_one_value_has_no_sd_and_none_has_no_mean():
    assert mean_sd([5.0])[0] == 5.0 and math.isnan(mean_sd([5.0])[1])
    m, sd, n = mean_sd([])
    assert math.isnan(m) and math.isnan(sd) and n == 0
