"""pflt.commands._validation_cli: the fold options shared by select-k and select-stages."""

import argparse

import pytest

from pflt.cli import UserError
from pflt.commands._validation_cli import add_fold_options, check_fold_options, progress_bar


def _parse(argv, folds=4):
    p = argparse.ArgumentParser()
    add_fold_options(p, folds=folds, folds_help="folds")
    return p.parse_args(argv)


def test_val_cv_defaults_to_every_fold():
    args = _parse([], folds=5)
    check_fold_options(args)
    assert (args.val_folds, args.val_cv, args.no_progress) == (5, 5, False)
    args = _parse(["--val-folds", "3", "--val-cv", "1", "--no-progress"])
    check_fold_options(args)
    assert (args.val_folds, args.val_cv, args.no_progress) == (3, 1, True)


@pytest.mark.parametrize("argv, msg", [
    (["--val-folds", "1"], "--val-folds must lie in [2, 100], got 1"),
    (["--val-folds", "101"], "--val-folds must lie in [2, 100], got 101"),
    (["--val-cv", "0"], "--val-cv must lie in [1, --val-folds = 4], got 0"),
    (["--val-cv", "5"], "--val-cv must lie in [1, --val-folds = 4], got 5"),
])
def test_out_of_range_is_a_user_error(argv, msg):
    with pytest.raises(UserError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        check_fold_options(_parse(argv))


def test_progress_callback_moves_the_bar_to_done(capsys):
    with progress_bar(3, "t", "run", disable=False) as progress:
        progress(2, 3)
        progress(3, 3)
    err = capsys.readouterr().err
    assert "3/3" in err
