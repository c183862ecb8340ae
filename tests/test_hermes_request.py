"""What qmem adds to a Hermes provider request (qmem.hermes.request) and which turns recall (qmem.hermes.turns).

Pure functions and a small locked LRU: no Hermes needed.  The request shapes are the ones Hermes
0.19 builds (agent/transports, agent/anthropic_adapter.py, agent/bedrock_adapter.py).
"""

import copy
import threading
import unittest

from qmem.fence.memorycontext import CLOSE_TAG, OPEN_TAG
from qmem.hermes.request import amended, offered_tools, prompt_found, text_of
from qmem.hermes.turns import MAX_TURNS, Turns, main_turn, prompt_text

RULES = "## qmem rules (shared long-term memory)\n- rule one"
PROMPT = "how do blue green deploys work"
BLOCK = f"{OPEN_TAG}\nheader\n[1] id=1\n  | recalled text\n{CLOSE_TAG}"
NUDGE = "[System: Continue now. Execute the required tool calls.]"


def blocks_in(value) -> int:
    return str(value).count(OPEN_TAG)


def chat_request(*, system="You are Hermes.", tools=("qmem_store", "terminal"), tail=()):
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages += [{"role": "user", "content": "an earlier prompt"}, {"role": "assistant", "content": "ok"},
                 {"role": "user", "content": PROMPT}, *tail]
    return {"model": "m", "messages": messages,
            "tools": [{"type": "function", "function": {"name": name, "parameters": {}}} for name in tools]}


class ChatCompletionsTests(unittest.TestCase):
    def test_rules_close_the_system_message_and_the_block_closes_the_prompt(self):
        request = chat_request()
        out = amended(request, "chat_completions", rules=RULES, prompt=PROMPT, block=BLOCK)
        self.assertEqual(out["messages"][0], {"role": "system", "content": "You are Hermes.\n\n" + RULES})
        self.assertEqual(out["messages"][3]["content"], PROMPT + "\n\n" + BLOCK)
        self.assertEqual(out["messages"][1]["content"], "an earlier prompt")
        self.assertEqual(len(out["messages"]), len(request["messages"]))  # never a new message

    def test_the_input_is_never_mutated_and_unchanged_parts_are_shared(self):
        shared_parts = [{"type": "text", "text": PROMPT}, {"type": "image_url", "image_url": {"url": "data:"}}]
        request = chat_request(tail=[{"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
                                     {"role": "tool", "tool_call_id": "c1", "content": "result"}])
        request["messages"][3]["content"] = shared_parts  # the stored message's own list, as Hermes hands it over
        snapshot = copy.deepcopy(request)
        out = amended(request, "chat_completions", rules=RULES, prompt=PROMPT, block=BLOCK)
        self.assertEqual(request, snapshot)
        self.assertIsNot(out, request)
        self.assertIs(out["tools"], request["tools"])
        self.assertIs(out["messages"][4], request["messages"][4])
        self.assertIsNot(out["messages"][3]["content"], shared_parts)
        self.assertEqual(out["messages"][3]["content"][:2], shared_parts)
        self.assertEqual(out["messages"][3]["content"][2], {"type": "text", "text": BLOCK})

    def test_the_block_skips_nudges_and_goes_on_the_prompt(self):
        tail = [{"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
                {"role": "tool", "tool_call_id": "c1", "content": "result"}, {"role": "user", "content": NUDGE}]
        out = amended(chat_request(tail=tail), "chat_completions", prompt=PROMPT, block=BLOCK)
        self.assertEqual(out["messages"][3]["content"], PROMPT + "\n\n" + BLOCK)
        self.assertEqual(out["messages"][-1]["content"], NUDGE)

    def test_the_prompt_is_found_inside_what_hermes_adds_around_it(self):
        request = chat_request()
        request["messages"][3]["content"] = "[Note: model switched]\n\n" + PROMPT + "\n\nplugin context"
        self.assertTrue(prompt_found(request, "chat_completions", PROMPT))
        out = amended(request, "chat_completions", prompt=PROMPT, block=BLOCK)
        self.assertTrue(out["messages"][3]["content"].endswith("plugin context\n\n" + BLOCK))

    def test_no_prompt_message_means_no_block(self):
        request = chat_request()
        self.assertFalse(prompt_found(request, "chat_completions", "another prompt"))
        out = amended(request, "chat_completions", rules=RULES, prompt="another prompt", block=BLOCK)
        self.assertEqual(blocks_in(out["messages"][1:]), 0)
        self.assertIsNone(amended(request, "chat_completions", prompt="another prompt", block=BLOCK))

    def test_once_however_often_it_runs(self):
        once = amended(chat_request(), "chat_completions", rules=RULES, prompt=PROMPT, block=BLOCK)
        self.assertIsNone(amended(once, "chat_completions", rules=RULES, prompt=PROMPT, block=BLOCK))
        newer = BLOCK.replace("recalled text", "newer text")
        twice = amended(once, "chat_completions", rules=RULES, prompt=PROMPT, block=newer)
        self.assertEqual(twice["messages"][0]["content"].count(RULES), 1)
        self.assertEqual(twice["messages"][3]["content"], PROMPT + "\n\n" + newer)
        cleared = amended(once, "chat_completions", rules=RULES, prompt=PROMPT, block=None)
        self.assertEqual(cleared["messages"][3]["content"], PROMPT)  # an old block is never left standing

    def test_a_block_the_user_typed_in_the_middle_is_not_removed(self):
        typed = f"look: {BLOCK} what is this"
        request = chat_request()
        request["messages"][3]["content"] = typed
        self.assertIsNone(amended(request, "chat_completions", prompt="look:", block=None))

    def test_system_as_a_cached_list_and_a_missing_system(self):
        cached = [{"type": "text", "text": "You are Hermes.", "cache_control": {"type": "ephemeral"}}]
        out = amended(chat_request(system=cached), "chat_completions", rules=RULES)
        self.assertEqual(out["messages"][0]["content"], [*cached, {"type": "text", "text": RULES}])
        bare = amended(chat_request(system=None), "chat_completions", rules=RULES)
        self.assertEqual(bare["messages"][0], {"role": "system", "content": RULES})
        self.assertEqual(bare["messages"][1]["content"], "an earlier prompt")


class OtherShapesTests(unittest.TestCase):
    def test_anthropic_oauth_identity_stays_first_and_tool_results_are_skipped(self):
        identity = {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}
        request = {"system": [identity, {"type": "text", "text": "Hermes prompt", "cache_control": {"type": "x"}}],
                   "tools": [{"name": "mcp__qmem_search", "input_schema": {}}],
                   "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]},
                                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x"}]},
                                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                              "content": PROMPT}]}]}
        snapshot = copy.deepcopy(request)
        out = amended(request, "anthropic_messages", rules=RULES, prompt=PROMPT, block=BLOCK)
        self.assertEqual(request, snapshot)
        self.assertEqual(out["system"][0], identity)
        self.assertEqual(out["system"][-1], {"type": "text", "text": RULES})
        self.assertEqual(out["messages"][0]["content"][-1], {"type": "text", "text": BLOCK})
        self.assertIs(out["messages"][2], request["messages"][2])
        self.assertEqual(offered_tools(request), {"qmem_search"})
        plain = amended({"system": "Hermes prompt", "messages": []}, "anthropic_messages", rules=RULES)
        self.assertEqual(plain["system"], "Hermes prompt\n\n" + RULES)

    def test_responses_api(self):
        request = {"instructions": "Hermes prompt", "tools": [{"type": "function", "name": "qmem_get"}],
                   "input": [{"role": "user", "content": [{"type": "input_text", "text": PROMPT}]},
                             {"type": "function_call", "call_id": "c", "name": "qmem_get", "arguments": "{}"},
                             {"type": "function_call_output", "call_id": "c", "output": "x"}]}
        out = amended(request, "codex_responses", rules=RULES, prompt=PROMPT, block=BLOCK)
        self.assertEqual(out["instructions"], "Hermes prompt\n\n" + RULES)
        self.assertEqual(out["input"][0]["content"][-1], {"type": "input_text", "text": BLOCK})
        self.assertIs(out["input"][2], request["input"][2])
        self.assertEqual(offered_tools(request), {"qmem_get"})

    def test_bedrock_converse(self):
        request = {"system": [{"text": "Hermes prompt"}],
                   "toolConfig": {"tools": [{"toolSpec": {"name": "qmem_meta"}}]},
                   "messages": [{"role": "user", "content": [{"text": PROMPT}]},
                                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "u"}}]},
                                {"role": "user", "content": [{"toolResult": {"toolUseId": "u", "content": []}}]}]}
        out = amended(request, "bedrock_converse", rules=RULES, prompt=PROMPT, block=BLOCK)
        self.assertEqual(out["system"], [{"text": "Hermes prompt"}, {"text": RULES}])
        self.assertEqual(out["messages"][0]["content"], [{"text": PROMPT}, {"text": BLOCK}])
        self.assertEqual(offered_tools(request), {"qmem_meta"})

    def test_an_unknown_shape_gets_nothing(self):
        for mode in ("codex_app_server", "", "chat"):
            self.assertIsNone(amended(chat_request(), mode, rules=RULES, prompt=PROMPT, block=BLOCK))

    def test_text_of_keeps_only_text_parts(self):
        self.assertEqual(text_of([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}},
                                  {"type": "tool_result", "text": "no"}, {"text": "b"}]), "a\nb")
        self.assertEqual(offered_tools({"tools": "not a list"}), set())


class MainTurnTests(unittest.TestCase):
    MAIN = {"platform": "cli", "write_origin": "assistant_tool", "task_id": "20261201_101010_abcdef",
            "session_id": "20261201_101010_abcdef", "env": {}}

    def test_only_a_main_cli_turn_recalls(self):
        self.assertTrue(main_turn(**self.MAIN))
        for change in ({"platform": "subagent"}, {"platform": "cron"}, {"platform": "curator"},
                       {"platform": "telegram"}, {"platform": "tui"}, {"platform": ""}, {"platform": None},
                       {"write_origin": "background_review"}, {"write_origin": "foreground"},
                       {"write_origin": None}, {"task_id": "bg_101010_abcdef"}, {"session_id": "bg_101010_abcdef"},
                       {"task_id": None}, {"env": {"HERMES_KANBAN_TASK": "t-17"}}):
            with self.subTest(change=change):
                self.assertFalse(main_turn(**{**self.MAIN, **change}))

    def test_prompt_text(self):
        self.assertEqual(prompt_text("  hi  "), "hi")
        self.assertEqual(prompt_text([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {}}]),
                         "look")
        for nothing in ("   ", [], None, 7, {"text": "x"}):
            self.assertIsNone(prompt_text(nothing))


class TurnsTests(unittest.TestCase):
    def test_a_main_turn_starts_its_recall_and_each_request_asks_it(self):
        asked, started = [], []
        turns = Turns(lambda prompt: asked.append(prompt) or f"block for {prompt}", start=started.append)
        turns.observe(turn_id="s:t:1", user_message=" first ", main=True)
        turns.observe(turn_id="s:sa-0:2", user_message="child goal", main=False)
        self.assertEqual(started, ["first"])  # at pre_llm_call, before any request: the sub-agent's not at all
        self.assertEqual([turns.block("s:t:1") for _ in range(4)], ["block for first"] * 4)
        self.assertEqual((turns.prompt("s:sa-0:2"), turns.block("s:sa-0:2")), (None, None))
        self.assertEqual((turns.prompt("never seen"), turns.prompt(None)), (None, None))
        self.assertEqual(asked, ["first"] * 4)  # the recall keeps one answer per prompt (tests.test_recall)

    def test_a_block_not_ready_for_the_first_request_joins_the_next(self):
        answers = iter([None, "late block", "late block"])
        turns = Turns(lambda prompt: next(answers))
        turns.observe(turn_id="t", user_message="p", main=True)
        self.assertEqual([turns.block("t"), turns.block("t"), turns.block("t")], [None, "late block", "late block"])

    def test_bounded(self):
        turns = Turns(lambda prompt: prompt)
        for number in range(MAX_TURNS + 10):
            turns.observe(turn_id=f"turn {number}", user_message=f"prompt {number}", main=True)
        self.assertEqual(len(turns), MAX_TURNS)
        self.assertIsNone(turns.prompt("turn 0"))
        self.assertEqual(turns.prompt(f"turn {MAX_TURNS + 9}"), f"prompt {MAX_TURNS + 9}")

    def test_many_threads_at_once(self):
        calls = []
        calls_lock = threading.Lock()

        def recall(prompt):
            with calls_lock:
                calls.append(prompt)
            return prompt.upper()

        turns = Turns(recall, max_turns=16 * 40)  # nothing evicted: every turn's answer can be checked
        start = threading.Barrier(16)
        answers = {}

        def session(number):
            start.wait()
            for turn in range(40):
                turn_id = f"{number}:{turn}"
                turns.observe(turn_id=turn_id, user_message=f"p{number}-{turn}", main=True)
                answers[turn_id] = {turns.block(turn_id) for _ in range(3)}

        threads = [threading.Thread(target=session, args=(n,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.assertEqual(len(answers), 16 * 40)
        self.assertEqual(answers, {f"{n}:{t}": {f"P{n}-{t}"} for n in range(16) for t in range(40)})
        self.assertEqual(sorted(calls), sorted(f"p{n}-{t}" for n in range(16) for t in range(40) for _ in range(3)))


if __name__ == "__main__":
    unittest.main()
