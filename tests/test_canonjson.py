"""Tests for qmem.curation.canonjson (RFC 8785 canonical JSON)."""

from __future__ import annotations

import collections
import decimal
import enum
import hashlib
import json
import struct
import unittest
from pathlib import Path

from qmem.curation.canonjson import (
    MAX_SAFE_INTEGER, CanonicalJSONError, StreamedArray, canonical_bytes, canonical_chunks, sha256_hex,
)
from qmem.errors import QmemError

SHARED = Path(__file__).resolve().parents[2] / "shared"
VECTORS = SHARED / "testdata" / "jcs_vectors.json"


def double(ieee_hex: str) -> float:
    """The float whose big-endian IEEE-754 bit pattern is *ieee_hex*."""
    return struct.unpack(">d", bytes.fromhex(ieee_hex))[0]


def parse_as_jcs(text: str) -> object:
    """Parse JSON text the way JCS does: every number is a double."""
    return json.loads(text, parse_int=float)


def text(value: object) -> str:
    return canonical_bytes(value).decode("utf-8")


@unittest.skipUnless(VECTORS.is_file(), f"shared test vectors not found at {VECTORS}")
class SharedVectorTests(unittest.TestCase):
    """The vectors in /work/shared/testdata/jcs_vectors.json (cyberphone + RFC)."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.vectors = json.loads(VECTORS.read_text(encoding="utf-8"))

    def test_canonicalization(self) -> None:
        cases = self.vectors["canonicalization"]
        self.assertGreater(len(cases), 0)
        for case in cases:
            with self.subTest(case["id"]):
                out = canonical_bytes(parse_as_jcs(case["input"]))
                self.assertEqual(out, case["expected"].encode("utf-8"))
                self.assertEqual(out.hex(), case["expected_utf8_hex"])
                self.assertEqual(hashlib.sha256(out).hexdigest(), case["expected_sha256"])

    def test_canonicalization_streams_to_the_same_hash(self) -> None:
        for case in self.vectors["canonicalization"]:
            with self.subTest(case["id"]):
                self.assertEqual(sha256_hex(parse_as_jcs(case["input"])),
                                 case["expected_sha256"])

    def test_edge_cases(self) -> None:
        cases = self.vectors["edge"]
        self.assertGreater(len(cases), 0)
        for case in cases:
            # Python's own parse keeps big integers exact, which this module
            # refuses; the JCS parse rounds them.  Both must obey the rule.
            for parse in (json.loads, parse_as_jcs):
                with self.subTest(case["id"], parse=parse.__name__):
                    value = parse(case["input"])
                    if case["rule"].startswith("must_error"):
                        with self.assertRaises(CanonicalJSONError):
                            canonical_bytes(value)
                    elif case["rule"].startswith("accept_error_or_expected"):
                        try:
                            out = canonical_bytes(value)
                        except CanonicalJSONError:
                            continue
                        self.assertEqual(out, case["expected"].encode("utf-8"))
                        self.assertEqual(hashlib.sha256(out).hexdigest(),
                                         case["expected_sha256"])
                    else:
                        self.fail(f"unknown rule {case['rule']!r}")

    def test_big_integers_parsed_as_doubles_match_the_reference(self) -> None:
        by_id = {case["id"]: case for case in self.vectors["edge"]}
        for name in ("ijson-int-beyond-2^53", "ijson-big-int-exponent"):
            with self.subTest(name):
                case = by_id[name]
                self.assertEqual(text(parse_as_jcs(case["input"])), case["expected"])

    def test_numbers(self) -> None:
        cases = self.vectors["numbers"] + self.vectors["numbers_readme_samples"]
        self.assertGreater(len(cases), 600)
        for case in cases:
            with self.subTest(ieee_hex=case["ieee_hex"]):
                self.assertEqual(text(double(case["ieee_hex"])), case["expected"])

    def test_non_finite_numbers(self) -> None:
        cases = self.vectors["numbers_nonfinite"]
        self.assertGreater(len(cases), 0)
        for case in cases:
            with self.subTest(case["value"]):
                with self.assertRaises(CanonicalJSONError):
                    canonical_bytes(double(case["ieee_hex"]))


class RFCExampleTests(unittest.TestCase):
    """Examples published in RFC 8785 itself, so they run without /work/shared."""

    # RFC 8785 Appendix B: IEEE-754 bit pattern -> serialization.
    NUMBERS = {
        "0000000000000000": "0",
        "8000000000000000": "0",
        "0000000000000001": "5e-324",
        "8000000000000001": "-5e-324",
        "7fefffffffffffff": "1.7976931348623157e+308",
        "ffefffffffffffff": "-1.7976931348623157e+308",
        "4340000000000000": "9007199254740992",
        "c340000000000000": "-9007199254740992",
        "4430000000000000": "295147905179352830000",
        "44b52d02c7e14af5": "9.999999999999997e+22",
        "44b52d02c7e14af6": "1e+23",
        "44b52d02c7e14af7": "1.0000000000000001e+23",
        "444b1ae4d6e2ef4e": "999999999999999700000",
        "444b1ae4d6e2ef4f": "999999999999999900000",
        "444b1ae4d6e2ef50": "1e+21",
        "3eb0c6f7a0b5ed8c": "9.999999999999997e-7",
        "3eb0c6f7a0b5ed8d": "0.000001",
        "41b3de4355555553": "333333333.3333332",
        "41b3de4355555554": "333333333.33333325",
        "41b3de4355555555": "333333333.3333333",
        "41b3de4355555556": "333333333.3333334",
        "41b3de4355555557": "333333333.33333343",
        "becbf647612f3696": "-0.0000033333333333333333",
        "43143ff3c1cb0959": "1424953923781206.2",
    }

    def test_number_table(self) -> None:
        for ieee_hex, expected in self.NUMBERS.items():
            with self.subTest(ieee_hex=ieee_hex):
                self.assertEqual(text(double(ieee_hex)), expected)

    def test_number_literals(self) -> None:
        for value, expected in [
            (1e21, "1e+21"), (1e20, "100000000000000000000"),
            (333333333.33333329, "333333333.3333333"),
            (1e-7, "1e-7"), (1e-6, "0.000001"), (-0.0, "0"), (0.0, "0"),
            (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
            (4.5, "4.5"), (2e-3, "0.002"), (1e30, "1e+30"), (1e-27, "1e-27"),
            (56.0, "56"), (-1.5, "-1.5"), (1e16, "10000000000000000"),
            (1.5e-5, "0.000015"), (123e-20, "1.23e-18"), (-1e-7, "-1e-7"),
        ]:
            with self.subTest(value=value):
                self.assertEqual(text(value), expected)

    def test_key_sorting_by_utf16_code_units(self) -> None:
        # RFC 8785 section 3.2.3, plus U+0000, which sorts first.
        value = {
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\U0001f600": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis",
            "\u0000": "Null",
        }
        expected = (
            '{"\\u0000":"Null","\\r":"Carriage Return","1":"One",'
            '"\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",'
            '"\u20ac":"Euro Sign","\U0001f600":"Emoji: Grinning Face",'
            '"\ufb33":"Hebrew Letter Dalet With Dagesh"}'
        )
        self.assertEqual(text(value), expected)

    def test_astral_key_sorts_before_private_use_area(self) -> None:
        # By code point U+E000 < U+1F600; by UTF-16 code unit D83D < E000.
        self.assertEqual(text({"\ue000": 1, "\U0001f600": 2}),
                         '{"\U0001f600":2,"\ue000":1}')

    def test_main_example(self) -> None:
        # RFC 8785 section 3.2.4.
        source = (
            '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
            ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
            ' "literals": [null, true, false]}'
        )
        expected = (
            '{"literals":[null,true,false],'
            '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
            '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
        )
        self.assertEqual(text(json.loads(source)), expected)


class SerializationTests(unittest.TestCase):

    def test_literals(self) -> None:
        self.assertEqual(text(None), "null")
        self.assertEqual(text(True), "true")
        self.assertEqual(text(False), "false")
        self.assertEqual(text([True, 1, 1.0]), "[true,1,1]")

    def test_containers(self) -> None:
        self.assertEqual(text({}), "{}")
        self.assertEqual(text([]), "[]")
        self.assertEqual(text({"b": [], "a": {}}), '{"a":{},"b":[]}')
        self.assertEqual(text([[1, [2]], {"x": [3.5]}]), '[[1,[2]],{"x":[3.5]}]')

    def test_tuple_is_an_array(self) -> None:
        self.assertEqual(canonical_bytes((1, "a", (2.5,))), canonical_bytes([1, "a", [2.5]]))

    def test_integers_within_the_safe_range(self) -> None:
        for number in (0, -1, 42, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER):
            with self.subTest(number=number):
                self.assertEqual(text(number), str(number))
        self.assertEqual(MAX_SAFE_INTEGER, 9007199254740991)

    def test_float_beyond_safe_range_is_written_as_a_double(self) -> None:
        self.assertEqual(text(2.0 ** 53), "9007199254740992")
        self.assertEqual(text(2.0 ** 60), "1152921504606847000")

    def test_float_arrays_match_item_by_item_encoding(self) -> None:
        # Float-only arrays take a faster path; it must not change the bytes.
        floats = [0.1, -0.0, 1e21, 1e-7, 5e-324, 123.0, -2.5e-9]
        mixed = floats + [None]
        self.assertEqual(text(floats), "[0.1,0,1e+21,1e-7,5e-324,123,-2.5e-9]")
        self.assertEqual(text(mixed), "[0.1,0,1e+21,1e-7,5e-324,123,-2.5e-9,null]")
        long_floats = [i / 7 for i in range(10000)]
        self.assertEqual(text(long_floats),
                         "[" + ",".join(text(x) for x in long_floats) + "]")

    def test_control_characters(self) -> None:
        source = "".join(chr(c) for c in range(0x20)) + "\x7f"
        expected = (
            '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007'
            '\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f'
            '\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017'
            '\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\x7f"'
        )
        self.assertEqual(text(source), expected)

    def test_only_quote_and_backslash_are_escaped_among_printables(self) -> None:
        self.assertEqual(text('a"b\\c/d<e>&\''), '"a\\"b\\\\c/d<e>&\'"')

    def test_non_ascii_is_utf8_not_escaped(self) -> None:
        self.assertEqual(canonical_bytes("\u00e9\u20ac\U0001f600\u2028"),
                         b'"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xe2\x80\xa8"')

    def test_shared_references_are_not_cycles(self) -> None:
        shared = {"k": [1, 2]}
        self.assertEqual(text([shared, shared, {"a": shared}]),
                         '[{"k":[1,2]},{"k":[1,2]},{"a":{"k":[1,2]}}]')

    def test_deep_nesting_has_no_recursion_limit(self) -> None:
        depth = 100_000
        nested_list: list = []
        nested_dict: dict = {}
        for _ in range(depth):
            nested_list = [nested_list]
            nested_dict = {"a": nested_dict}
        self.assertEqual(canonical_bytes(nested_list), b"[" * (depth + 1) + b"]" * (depth + 1))
        self.assertEqual(canonical_bytes(nested_dict),
                         b'{"a":' * depth + b"{}" + b"}" * depth)


class StreamingTests(unittest.TestCase):

    def sample(self) -> dict:
        return {
            "header": {"version": 1, "host": "pi", "note": "caf\u00e9 \U0001f600"},
            "points": [{"id": i, "vector": [i / 3, -i * 1e-9], "tags": ["t", str(i)]}
                       for i in range(3000)],
            "footer": None,
        }

    def test_chunks_join_to_the_one_shot_bytes(self) -> None:
        value = self.sample()
        chunks = list(canonical_chunks(value))
        self.assertGreater(len(chunks), 1)
        self.assertTrue(all(isinstance(chunk, bytes) for chunk in chunks))
        self.assertEqual(b"".join(chunks), canonical_bytes(value))

    def test_chunks_are_bounded(self) -> None:
        chunks = list(canonical_chunks(self.sample()))
        # About 64 KiB of text per chunk, at most 4 bytes of UTF-8 a character.
        self.assertLess(max(len(chunk) for chunk in chunks), 4 * 70_000)

    def test_sha256_hex_is_the_hash_of_the_bytes(self) -> None:
        value = self.sample()
        digest = sha256_hex(value)
        self.assertEqual(digest, hashlib.sha256(canonical_bytes(value)).hexdigest())
        self.assertRegex(digest, r"\A[0-9a-f]{64}\Z")

    def test_streamed_array_equals_a_list(self) -> None:
        value = self.sample()
        points = value["points"]
        streamed = dict(value, points=StreamedArray(p for p in points))
        self.assertEqual(sha256_hex(streamed), sha256_hex(value))

    def test_streamed_array_is_read_lazily(self) -> None:
        produced = []

        def items():
            for i in range(100_000):
                produced.append(i)
                yield {"id": i}

        chunks = canonical_chunks(StreamedArray(items()))
        first = next(chunks)
        self.assertTrue(first.startswith(b'[{"id":0},{"id":1}'))
        self.assertLess(len(produced), 100_000)
        rest = b"".join(chunks)
        self.assertEqual(len(produced), 100_000)
        self.assertTrue(rest.endswith(b'{"id":99999}]'))

    def test_streamed_array_top_level_and_empty(self) -> None:
        self.assertEqual(text(StreamedArray([])), "[]")
        self.assertEqual(text(StreamedArray(iter([3, "x"]))), '[3,"x"]')
        self.assertEqual(text(StreamedArray([StreamedArray([1])])), "[[1]]")

    def test_streamed_array_can_be_encoded_only_once(self) -> None:
        stream = StreamedArray(iter([1, 2]))
        self.assertEqual(text(stream), "[1,2]")
        with self.assertRaisesRegex(CanonicalJSONError, "only once"):
            canonical_bytes(stream)
        twice = StreamedArray([1])
        with self.assertRaisesRegex(CanonicalJSONError, "only once"):
            canonical_bytes([twice, twice])

    def test_errors_surface_from_the_iterator(self) -> None:
        chunks = canonical_chunks([1, float("nan")])  # no error yet: lazy
        with self.assertRaises(CanonicalJSONError):
            list(chunks)

    def test_error_in_a_late_streamed_item(self) -> None:
        def items():
            yield from ({"id": i} for i in range(50_000))
            yield {"bad": object()}

        with self.assertRaises(CanonicalJSONError):
            sha256_hex({"points": StreamedArray(items())})


class RejectionTests(unittest.TestCase):

    def assertRejected(self, value: object, pattern: str = "") -> CanonicalJSONError:
        with self.assertRaisesRegex(CanonicalJSONError, pattern) as caught:
            canonical_bytes(value)
        error = caught.exception
        self.assertIsInstance(error, QmemError)
        self.assertEqual(error.category, "input")
        return error

    def test_cycles(self) -> None:
        looped_list: list = [1]
        looped_list.append(looped_list)
        looped_dict: dict = {}
        looped_dict["self"] = looped_dict
        indirect: dict = {"a": []}
        indirect["a"].append({"b": indirect})
        stream_holder: list = []
        stream = StreamedArray(stream_holder)
        stream_holder.append(stream)
        for value in (looped_list, looped_dict, indirect, stream, [[looped_list]]):
            with self.subTest(value=type(value).__name__):
                self.assertRejected(value, "cycle")

    def test_non_finite_numbers(self) -> None:
        for value in (float("nan"), float("inf"), float("-inf")):
            for wrapped in (value, [value], [1.0, value], {"x": value}, [None, value]):
                with self.subTest(wrapped=wrapped):
                    self.assertRejected(wrapped, "NaN")

    def test_non_str_keys(self) -> None:
        for key in (1, 1.5, None, True, (1, 2), b"k"):
            with self.subTest(key=key):
                self.assertRejected({key: 1}, "keys must be str")

    def test_str_subclass_key(self) -> None:
        class Name(str):
            pass

        self.assertRejected({Name("a"): 1}, "keys must be str")

    def test_non_plain_objects(self) -> None:
        class Colour(enum.IntEnum):
            RED = 1

        class Text(str):
            pass

        class Number(float):
            pass

        class Mapping(dict):
            pass

        class Sequence(list):
            pass

        Point = collections.namedtuple("Point", "x y")
        values = [
            collections.OrderedDict(a=1), Mapping(a=1), Sequence([1]), Point(1, 2),
            Colour.RED, Text("a"), Number(1.0), {1, 2}, frozenset(), b"bytes",
            bytearray(b"x"), decimal.Decimal("1.5"), 1j, object(), range(3),
            iter([1]), (x for x in [1]), StreamedArray,
        ]
        for value in values:
            with self.subTest(value=type(value).__name__):
                self.assertRejected([value], "cannot canonicalize")

    def test_lone_surrogates(self) -> None:
        for value in ("\ud800", "a\udc00b", {"a": "\udfff"}, ["x", "\ud83d"]):
            with self.subTest(value=ascii(value)):
                self.assertRejected(value, "surrogate")

    def test_surrogate_key(self) -> None:
        self.assertRejected({"\udc00": 1}, "surrogate")

    def test_surrogate_pair_as_two_code_points(self) -> None:
        # A Python str holds code points, and surrogates are not valid ones;
        # json.loads combines an escaped pair, so only hand-built text has this.
        self.assertRejected("\ud83d\ude00", "surrogate")
        self.assertEqual(text(json.loads('"\\ud83d\\ude00"')), '"\U0001f600"')

    def test_integers_beyond_the_safe_range(self) -> None:
        for number in (MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**53 + 1, 10**23, -10**30):
            with self.subTest(number=number):
                self.assertRejected(number, "2\\*\\*53")
                self.assertRejected({"n": [number]}, "2\\*\\*53")

    def test_messages_do_not_echo_values(self) -> None:
        secret = "hunter2-\ud800-do-not-echo"
        error = self.assertRejected({"password": secret})
        self.assertNotIn("hunter2", str(error))
        error = self.assertRejected({"password": ["ok", 12345678901234567890]})
        self.assertNotIn("12345678901234567890", str(error))


if __name__ == "__main__":
    unittest.main()
