import unittest

from qmem.localdb.lexical import MAX_QUERY_TERMS, STOPWORDS, match_expression, query_terms


class StopwordTests(unittest.TestCase):
    def test_a_fixed_list_of_function_words(self):
        self.assertTrue(150 <= len(STOPWORDS) <= 180, len(STOPWORDS))
        self.assertTrue(all(word == word.lower().strip() and " " not in word for word in STOPWORDS))
        for word in ("what", "did", "the", "you", "to", "when", "is", "i'm", "of"):
            self.assertIn(word, STOPWORDS)

    def test_negations_and_content_words_are_never_stopwords(self):
        for word in ("not", "no", "never", "nor", "neither", "none", "nothing", "without", "don't", "didn't",
                     "isn't", "can't", "won't", "may", "like", "go", "one", "2023"):
            self.assertNotIn(word, STOPWORDS)

    def test_question_keeps_its_content_words_in_order(self):
        parsed = query_terms("When did Caroline go to the LGBTQ support group?")
        self.assertEqual(parsed.terms, ("Caroline", "go", "LGBTQ", "support", "group?"))
        self.assertEqual(parsed.stopwords, ("When", "did", "to", "the"))

    def test_stopwords_compared_case_folded_with_edge_punctuation_and_curly_apostrophes(self):
        parsed = query_terms("WHAT? (the) You’re deploying, didn’t")
        self.assertEqual(parsed.terms, ("deploying,", "didn’t"))
        self.assertEqual(parsed.stopwords, ("WHAT?", "(the)", "You’re"))

    def test_all_stopwords_searches_all_of_them(self):
        parsed = query_terms("the who")
        self.assertEqual((parsed.terms, parsed.stopwords), (("the", "who"), ()))

    def test_operator_words_are_words(self):
        # AND/OR are stopwords ("and", "or"); NOT and NEAR stay, as words.
        self.assertEqual(query_terms("NOT NEAR AND OR").terms, ("NOT", "NEAR"))


class QueryTermTests(unittest.TestCase):
    def test_possessive_is_the_owner(self):
        parsed = query_terms("Caroline's Melanie’s it's let's 's")
        self.assertEqual((parsed.terms, parsed.stopwords), (("Caroline", "Melanie", "'s"), ("it's", "let's")))

    def test_duplicates_compared_without_edge_punctuation(self):
        self.assertEqual(query_terms("group group? GROUP, (group)").terms, ("group",))

    def test_bounds_count_content_words_only(self):
        words = " ".join(f"w{i}" for i in range(40))
        parsed = query_terms("the of and " + words)
        self.assertEqual((len(parsed.terms), parsed.dropped), (MAX_QUERY_TERMS, 40 - MAX_QUERY_TERMS))

    def test_expressions_quote_every_term(self):
        self.assertEqual(match_expression(['a"b', "NOT"]), '"a""b" AND "NOT"')
        self.assertEqual(match_expression(["a", "b"], any_term=True), '"a" OR "b"')
        self.assertEqual(match_expression(["a"], prefix=True), '"a"*')


if __name__ == "__main__":
    unittest.main()
