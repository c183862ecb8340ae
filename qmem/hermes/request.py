"""What qmem adds to one Hermes provider request, in each request shape Hermes sends (pure).

Hermes (0.17 and later) hands ``llm_execution`` middleware the live ``api_kwargs`` of each
provider request.  Its message dicts are shallow copies of the stored conversation's, so a
nested content list there *is* the stored message's list.  :func:`amended` promises:

* **Copy on write.**  Its input is never mutated.  The result is a new dict that shares every
  part it did not change; a changed message, content list or system list is a new object.
  When nothing changes the result is None.
* **The rules** go at the end of the shape's system carrier: ``messages[0]`` (``role:
  system``; one is put first when there is none) for ``chat_completions``, ``system`` for
  ``anthropic_messages`` and ``bedrock_converse`` (after every block, so an OAuth identity
  block stays first and a cached block keeps its cache), ``instructions`` for
  ``codex_responses``.  A carrier that already holds them is left as it is: they are sent once.
* **The recall block** goes at the end of the current turn's user message: the last user
  message whose text (text parts only) contains the turn's prompt.  That skips the nudges
  Hermes appends mid-turn and the tool results that travel as user messages (Anthropic,
  Bedrock).  It is never a new message (strict providers reject a user message right after a
  tool result) and never system text (it changes with every prompt, and the system text is
  what providers cache).  A qmem block already at the end of that message is replaced, so the
  message carries one.  No such message, no block.
* :func:`offered_tools` lists the tool names a request offers, whatever its shape.

Any other ``api_mode`` gets nothing (``codex_app_server`` never reaches middleware).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..fence.memorycontext import CLOSE_TAG, OPEN_TAG

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = []

#: Hermes' ``api_mode`` values whose requests qmem knows how to amend.
API_MODES = ("chat_completions", "anthropic_messages", "codex_responses", "bedrock_converse")

# The text part each shape uses inside a content list.
_TEXT_PART = {"chat_completions": "text", "anthropic_messages": "text", "codex_responses": "input_text"}
_OAUTH_TOOL_PREFIX = "mcp__"  # Hermes prefixes every tool name on Anthropic OAuth requests


def _is_text_part(part: Any) -> bool:
    if not isinstance(part, Mapping) or not isinstance(part.get("text"), str):
        return False
    kind = part.get("type")
    return kind in ("text", "input_text") or (kind is None and len(part) == 1)  # Bedrock: {"text": …}


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list (tool results,
    images and other blocks left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content if _is_text_part(part))
    return ""


def _text_part(api_mode: str, text: str) -> dict[str, str]:
    kind = _TEXT_PART.get(api_mode)
    return {"type": kind, "text": text} if kind else {"text": text}


def _is_block(text: str) -> bool:
    return text.startswith(OPEN_TAG) and text.endswith(CLOSE_TAG) and text.count(OPEN_TAG) == 1


def _append(content: Any, text: str, api_mode: str) -> Any:
    """``content`` (a string or a list of parts) with ``text`` at its end, as a new object."""
    if isinstance(content, list):
        return [*content, _text_part(api_mode, text)]
    if isinstance(content, str) and content:
        return f"{content}\n\n{text}"
    return text


def _holds(content: Any, text: str) -> bool:
    if isinstance(content, str):
        return content.endswith(text)
    if isinstance(content, list):
        return any(_is_text_part(part) and part["text"] == text for part in content)
    return False


def _without_block(content: Any) -> Any:
    """``content`` without a qmem block at its end (the same object when there is none)."""
    if isinstance(content, str):
        start = content.rfind("\n\n" + OPEN_TAG)
        if start >= 0 and _is_block(content[start + 2:]):
            return content[:start]
        return content
    if isinstance(content, list) and content and _is_text_part(content[-1]) and _is_block(content[-1]["text"]):
        return content[:-1]
    return content


# --- the system carrier --------------------------------------------------------------------

def _with_rules(request: Mapping[str, Any], api_mode: str, rules: str) -> dict[str, Any] | None:
    """The changed top-level entries that put ``rules`` in the system carrier, or None."""
    if api_mode == "chat_completions":
        messages = request.get("messages")
        if not isinstance(messages, list):
            return None
        first = messages[0] if messages else None
        if isinstance(first, Mapping) and first.get("role") == "system":
            if _holds(first.get("content"), rules):
                return None
            system = {**first, "content": _append(first.get("content"), rules, api_mode)}
            return {"messages": [system, *messages[1:]]}
        return {"messages": [{"role": "system", "content": rules}, *messages]}
    key = "instructions" if api_mode == "codex_responses" else "system"
    carrier = request.get(key)
    if _holds(carrier, rules):
        return None
    if api_mode == "bedrock_converse":
        return {key: [*(carrier if isinstance(carrier, list) else []), {"text": rules}]}
    if carrier is None or isinstance(carrier, (str, list)):
        return {key: _append(carrier, rules, api_mode)}
    return None


# --- the current turn's user message -------------------------------------------------------

def _turn_messages(request: Mapping[str, Any], api_mode: str) -> tuple[str, Any]:
    key = "input" if api_mode == "codex_responses" else "messages"
    return key, request.get(key)


def _prompt_index(messages: Sequence[Any], prompt: str) -> int | None:
    """The index of the last user message whose text contains ``prompt``."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and message.get("role") == "user" and prompt in text_of(message.get("content")):
            return index
    return None


def _with_block(request: Mapping[str, Any], api_mode: str, prompt: str, block: str | None,
                changes: Mapping[str, Any]) -> dict[str, Any] | None:
    """The changed top-level entries that put ``block`` on the prompt's message (and remove a
    qmem block already there), or None."""
    key, messages = _turn_messages(request, api_mode)
    messages = changes.get(key, messages)
    if not isinstance(messages, list) or not prompt:
        return None
    index = _prompt_index(messages, prompt)
    if index is None:
        return None
    message = messages[index]
    content = _without_block(message.get("content"))
    if block:
        content = _append(content, block, api_mode)
    if content == message.get("content"):
        return None  # already as it should be (amended once before)
    return {key: [*messages[:index], {**message, "content": content}, *messages[index + 1:]]}


def prompt_found(request: Mapping[str, Any], api_mode: str, prompt: str) -> bool:
    """Whether the request holds the user message of ``prompt`` (where a block would go)."""
    _key, messages = _turn_messages(request, api_mode)
    return bool(prompt) and isinstance(messages, list) and _prompt_index(messages, prompt) is not None


def amended(request: Mapping[str, Any], api_mode: str, *, rules: str | None = None, prompt: str | None = None,
            block: str | None = None) -> dict[str, Any] | None:
    """A new request with ``rules`` in the system carrier and ``block`` on the user message of
    ``prompt`` (see the module docstring), or None when there is nothing to change."""
    if api_mode not in API_MODES or not isinstance(request, Mapping):
        return None
    changes: dict[str, Any] = {}
    if rules:
        changes.update(_with_rules(request, api_mode, rules) or {})
    if prompt:
        changes.update(_with_block(request, api_mode, prompt, block, changes) or {})
    return {**request, **changes} if changes else None


def offered_tools(request: Mapping[str, Any]) -> set[str]:
    """The names of the tools ``request`` offers (OpenAI, Anthropic, Responses or Bedrock shape),
    without the prefix Hermes adds on Anthropic OAuth requests."""
    tools = request.get("tools")
    if not isinstance(tools, list):
        config = request.get("toolConfig")
        tools = config.get("tools") if isinstance(config, Mapping) else None
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, Mapping):
            continue
        holder = tool.get("function") or tool.get("toolSpec") or tool
        name = holder.get("name") if isinstance(holder, Mapping) else None
        if isinstance(name, str):
            names.add(name[len(_OAUTH_TOOL_PREFIX):] if name.startswith(_OAUTH_TOOL_PREFIX) else name)
    return names
