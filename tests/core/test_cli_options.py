"""Options given after a run command's ``key=value`` overrides (``core.cli_options``)."""
import argparse

import pytest

from vlnverse.core.cli_options import split_trailing_options
from vlnverse.core.errors import ConfigError


def _args(*overrides):
    return argparse.Namespace(overrides=list(overrides), workers=None, envs=None, benchmark=None, split=None,
                              scene_root=[])


def test_trailing_options_move_onto_the_arguments():
    args = _args("seed=3", "--envs", "4", "--benchmark", "proc-v1", "--split=test", "--no-progress", "out=x")
    assert split_trailing_options(args, extra=("--benchmark", "--split")) == ["seed=3", "out=x"]
    assert (args.envs, args.benchmark, args.split, args.no_progress) == (4, "proc-v1", "test", True)


def test_an_option_of_another_command_is_unknown():
    with pytest.raises(ConfigError, match=r"unknown option '--benchmark' \(expected .*--job-timeout SECONDS, --scene-root"):
        split_trailing_options(_args("--benchmark", "proc-v1"))
    with pytest.raises(ConfigError, match=r"--split: '--split' needs a value"):
        split_trailing_options(_args("--split"), extra=("--benchmark", "--split"))
    with pytest.raises(ConfigError, match=r"--envs: got 'x' \(expected an integer >= 1\)"):
        split_trailing_options(_args("--envs", "x"))
