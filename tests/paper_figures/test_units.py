"""paper_figures.units: memory in bytes, shown in binary units (issue 36: KiB / 10⁶ was
labelled GB)."""

import pytest

from paper_figures.units import format_bytes, peak_rss_bytes


def test_the_readme_example_is_1_50_gib():
    assert format_bytes(1_576_596 * 1024) == "1.50 GiB"     # not "1.58 GB" (KiB / 10⁶)


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.00 KiB"),
                                     (1536 * 2 ** 20, "1.50 GiB"), (3 * 2 ** 40, "3.00 TiB")])
def test_binary_units(n, text):
    assert format_bytes(n) == text


def test_negative_sizes_are_refused():
    with pytest.raises(ValueError, match=">= 0"):
        format_bytes(-1)


def test_peak_rss_is_bytes():
    assert peak_rss_bytes() > 20 * 2 ** 20       # this interpreter alone holds > 20 MiB
