"""``qmem.local``'s parser built for one sub-command answers as the whole parser does.

:func:`qmem.cli.localargs.build_parser` given the command line builds only the sub-command it
names.  For every sub-command, valid and invalid lines (unknown options, bad choices, missing
values, ``--help``) must give the same namespace, or the same error, or the same help text, as
the parser with every sub-command; and the formatter's width is the one ``shutil`` would find.
"""

import argparse
import itertools
import os
import shutil
import unittest
from unittest import mock

from qmem.cli.frontend import CommandParser, HelpRequested, UsageError, terminal_columns
from qmem.cli.localargs import COMMAND_NAMES, build_parser

#: Arguments tried after each sub-command name, alone and in pairs.
TAILS = (
    [], ["--json"], ["--help"], ["-h"], ["word"], ["two", "words"], ["--project", "p"], ["--project"],
    ["--kind", "decision"], ["--kind", "nope"], ["--limit", "5"], ["--limit", "0"], ["--limit", "x"],
    ["--all"], ["retry"], ["retry", "ID"], ["reset"], ["--reset"], ["pi"], ["hermes", "--copy"], ["claude"],
    ["--text", "t"], ["--text", "-"], ["--queue-only"], ["--host", "prime"], ["--bogus"], ["--"], ["--", "-x"],
    ["--superseded", "--private", "--deleted"], ["--expires-at", "2027-01-01T00:00:00Z"],
)


def outcome(parser: CommandParser, argv: list[str]) -> tuple[str, object]:
    try:
        return "args", vars(parser.parse_args(argv))
    except HelpRequested as help_text:
        return "help", str(help_text)
    except UsageError as exc:
        return "usage", str(exc)


class PartialParserTests(unittest.TestCase):
    def test_command_names_are_the_whole_parsers(self) -> None:
        sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
        self.assertEqual(tuple(sub.choices), COMMAND_NAMES)

    def test_every_line_answers_as_with_the_whole_parser(self) -> None:
        whole = build_parser()
        lines = [[], ["--help"], ["--version"], ["nope"], ["--json"], ["--json", "find", "x"]]
        for name in COMMAND_NAMES:
            lines += [[name, *tail] for tail in TAILS]
            lines += [[name, *a, *b] for a, b in itertools.combinations(TAILS[1:12], 2)]
        for argv in lines:
            with self.subTest(argv=argv):
                self.assertEqual(outcome(build_parser(argv), argv), outcome(whole, argv))

    def test_a_line_that_names_no_command_gets_every_command(self) -> None:
        kind, text = outcome(build_parser(["--help"]), ["--help"])
        self.assertEqual(kind, "help")
        for name in COMMAND_NAMES:
            self.assertIn(name, text)


class WidthTests(unittest.TestCase):
    def test_the_width_is_the_one_shutil_finds(self) -> None:
        for columns in ("", "40", "200", "abc", "-3"):
            with self.subTest(COLUMNS=columns), mock.patch.dict(os.environ, {"COLUMNS": columns}):
                self.assertEqual(terminal_columns(), shutil.get_terminal_size().columns)

    def test_help_wraps_as_before(self) -> None:
        for columns in ("50", "120"):
            with self.subTest(COLUMNS=columns), mock.patch.dict(os.environ, {"COLUMNS": columns}):
                parser = build_parser(["find"])
                plain = argparse.HelpFormatter(prog=parser.prog)  # width from shutil
                mine = parser._get_formatter()
                self.assertEqual(mine._width, plain._width)


if __name__ == "__main__":
    unittest.main()
