"""``qmem.files.smallfile``: real files in a temporary directory, every read under a watchdog thread.

Each kind of file that is there but must not be read (a FIFO, ``/dev/zero``, a directory, a
socket, a dangling link, a loop of links, a file over the limit) and each document that must
not be decoded (nesting 100,000 deep, NaN, Infinity, invalid UTF-8, broken JSON, a key written
twice when asked) is one :class:`UnreadableFile` with its reason, a message that names the
path, and never the file's content.  Nothing there is None, and a normal file reads as before.
"""

import os
import shutil
import socket
import tempfile
import threading
import unittest
from pathlib import Path

from qmem.files.smallfile import (
    MIB, OversizedNumber, UnreadableFile, decode_json, read_file_head, read_json_file, read_small_file,
)

WATCHDOG_S = 60  # seconds; a read takes milliseconds, a hang forever
CONTENT = "CONTENT-4b1d-never-shown"  # in every bad document; no message may carry it


def watched(case, function):
    """``function()``'s result or exception, failing the test if it does not return within the watchdog."""
    outcome = {}

    def run():
        try:
            outcome["result"] = function()
        except BaseException as exc:  # noqa: BLE001 - handed to the test as is
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WATCHDOG_S)
    case.assertFalse(thread.is_alive(), "still reading after the watchdog: it hangs")
    return outcome


class SmallFileTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="qmem-smallfile-"))
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.path = self.dir / "file.json"

    def refused(self, function, reason):
        outcome = watched(self, function)
        error = outcome.get("error")
        self.assertIsInstance(error, UnreadableFile, outcome)
        self.assertEqual(error.reason, reason, error)
        self.assertEqual(error.category, "file")
        self.assertTrue(error.message.startswith(f"{self.path} "), error.message)
        self.assertNotIn("\n", error.message)
        self.assertNotIn(CONTENT, error.message)
        return error


class WhatIsThereTests(SmallFileTestCase):
    def test_nothing_there_is_none_and_a_regular_file_reads_whole(self):
        self.assertIsNone(read_small_file(self.path, MIB))
        self.assertIsNone(read_json_file(self.path))
        self.assertIsNone(read_file_head(self.path, 10))
        self.path.write_bytes(b'\xef\xbb\xbf{"name": "qmem", "n": [1, 2.5, true, null]}')
        self.assertEqual(read_json_file(self.path), {"name": "qmem", "n": [1, 2.5, True, None]})
        self.assertEqual(read_file_head(self.path, 4), b"\xef\xbb\xbf{")
        linked = self.dir / "link.json"
        linked.symlink_to(self.path)
        self.assertEqual(read_json_file(linked), {"name": "qmem", "n": [1, 2.5, True, None]})

    def test_a_file_at_the_limit_reads_and_one_byte_more_is_refused(self):
        self.path.write_bytes(b" " * 1023 + b"1")
        self.assertEqual(read_json_file(self.path, 1024), 1)
        self.path.write_bytes(b" " * 1024 + b"1")
        error = self.refused(lambda: read_json_file(self.path, 1024), "too-large")
        self.assertIn("is larger than 1 KiB", error.message)
        with open(self.path, "wb") as handle:
            handle.truncate(50 * MIB)  # sparse: 50 MB to whoever reads it all
        self.assertIn("larger than 1 MiB", self.refused(lambda: read_small_file(self.path, MIB), "too-large").message)
        self.assertEqual(read_file_head(self.path, 8), b"\0" * 8)  # the head of any regular file

    def test_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(self):
        os.mkfifo(self.path)
        for read in (lambda: read_small_file(self.path, MIB), lambda: read_file_head(self.path, 10)):
            self.assertIn("is a named pipe (FIFO), not a regular file", self.refused(read, "not-regular").message)

    def test_a_device_a_directory_and_a_socket_are_refused_naming_what_they_are(self):
        self.path.symlink_to("/dev/zero")
        self.assertIn("a character device", self.refused(lambda: read_small_file(self.path, MIB), "not-regular").words)
        self.path.unlink()
        self.path.mkdir()
        self.assertIn("a directory", self.refused(lambda: read_json_file(self.path), "not-regular").words)
        self.path.rmdir()
        server = socket.socket(socket.AF_UNIX)
        self.addCleanup(server.close)
        try:
            server.bind(str(self.path))
        except OSError as exc:  # a temp path too long for a socket name
            self.skipTest(f"no Unix socket here: {exc}")
        self.assertIn("a socket", self.refused(lambda: read_small_file(self.path, MIB), "not-regular").words)

    def test_a_dangling_link_is_not_taken_for_no_file_and_a_loop_is_named(self):
        self.path.symlink_to(self.dir / "gone.json")
        self.refused(lambda: read_json_file(self.path), "dangling-link")
        self.path.unlink()
        self.path.symlink_to(self.path)
        self.assertIn("loop of symbolic links", self.refused(lambda: read_json_file(self.path), "link-loop").message)

    def test_a_file_that_cannot_be_opened_gives_the_system_reason(self):
        blocker = self.dir / "plain"
        blocker.write_text(CONTENT)
        self.path = blocker / "below.json"  # a path through a file
        error = self.refused(lambda: read_json_file(self.path), "io")
        self.assertIn("cannot be read: Not a directory", error.message)
        self.path = self.dir / "nul\0name.json"
        self.assertIn("its name holds a NUL character", self.refused(lambda: read_json_file(self.path), "io").message)


class DocumentTests(SmallFileTestCase):
    def decode(self, data, **options):
        self.path.write_bytes(data)
        return lambda: read_json_file(self.path, **options)

    def test_nesting_of_any_depth_is_refused_not_a_recursion_crash(self):
        for data in ("[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000, "[" * 100_000):
            with self.subTest(start=data[:5]):
                document = f'{{"c": "{CONTENT}", "d": {data}}}'.encode()
                self.assertIn("nested too deeply", self.refused(self.decode(document), "too-deep").message)

    def test_a_huge_integer_is_kept_as_its_digit_count_and_never_converted(self):
        self.path.write_text('{"n": -' + "9" * 10_000 + ', "m": 123456789012345678901234567890}')
        document = watched(self, lambda: read_json_file(self.path))["result"]
        self.assertEqual(document["n"], OversizedNumber(10_000))
        self.assertEqual(document["m"], 123456789012345678901234567890)  # 30 digits: a number still
        self.assertEqual(repr(document["n"]), "<a 10000-digit number>")
        short = decode_json(b"[1234]", self.path, max_digits=3)
        self.assertEqual(short, [OversizedNumber(4)])

    def test_nan_and_the_infinities_are_refused(self):
        for word in ("NaN", "Infinity", "-Infinity"):
            with self.subTest(word=word):
                error = self.refused(self.decode(f'{{"c": "{CONTENT}", "v": [{word}]}}'.encode()), "not-a-number")
                self.assertIn(f"holds {word}, which is not a JSON number", error.message)

    def test_invalid_utf8_and_broken_json_are_refused_without_their_content(self):
        self.refused(self.decode(f'{{"c": "{CONTENT}\xff"}}'.encode("latin-1")), "not-utf8")
        error = self.refused(self.decode(f'{{"c": "{CONTENT}",,}}'.encode()), "not-json")
        self.assertRegex(error.message, r"is not valid JSON: .* at line 1 column \d+$")
        self.refused(self.decode(b""), "not-json")

    def test_a_key_written_twice_is_refused_only_when_asked(self):
        self.assertEqual(watched(self, self.decode(b'{"a": 1, "a": 2}'))["result"], {"a": 2})
        error = self.refused(self.decode(b'{"a": 1, "a": 2}', unique_keys=True), "duplicate-key")
        self.assertIn("has the key 'a' twice in one object", error.message)
        error = self.refused(self.decode(b'{"a": {"k": 1, "k": 2}}', unique_keys=True, show_key=lambda key: "…"),
                             "duplicate-key")
        self.assertIn("has the key '…' twice", error.message)


if __name__ == "__main__":
    unittest.main()
