"""`planact` dispatches every subcommand to its workload's own entry point and lists them all in --help."""

from __future__ import annotations

import importlib

from flows import cli


def test_help_lists_every_command_and_each_has_an_entry_point(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, (_, module) in cli.COMMANDS.items():
        assert name in out
        assert callable(importlib.import_module(module).main)
    assert {"train", "evaluate", "register", "aflow", "aflow-train", "repair", "models", "sandbox"} <= set(cli.COMMANDS)


def test_an_unknown_command_is_an_error_with_the_list(capsys):
    assert cli.main(["fly"]) == 2
    assert "commands:" in capsys.readouterr().out
