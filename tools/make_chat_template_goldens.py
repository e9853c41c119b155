#!/usr/bin/env python3
"""Builds tests/data/chat/goldens.json: chat templates rendered by Hugging Face transformers.

Every case is rendered with transformers' own apply_chat_template(..., tokenize=False) on a
PreTrainedTokenizerFast that carries the case's bos/eos tokens and template, so the expected text
is exactly what transformers produces (jinja2 ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, its tojson / raise_exception / strftime_now). Two kinds of case:

  model cases    the verbatim hub templates in tests/data/chat/templates/ (tests/data/chat/README.md
                 says where each comes from)
                 over conversations chosen to reach every branch they have: system prompts or
                 none, multi-turn, add_generation_prompt true / false, tools with nested JSON
                 schemas, tool calls (dict and string arguments, parallel calls), tool results,
                 Llama's builtin tools and tools_in_user_message, Qwen3 thinking (enable_thinking,
                 <think> in content, reasoning_content, multi-step tool use), Mistral's tool-call
                 ids and content blocks, the role alternation Gemma and Mistral enforce, Gemma 3's
                 system folding and content parts (text and image), non-ASCII text and
                 characters that JSON and Python escape differently.
  snippet cases  small inline templates, one Jinja construct each (whitespace control, precedence,
                 slices, filters, tests, loop variables, scoping, printing of Python values).

A case whose render raises records the exception type and message instead ("error"); for
raise_exception the C++ renderer must return exactly that message.

Fields of each case: name; template (a file under tests/data/chat/) or source (inline);
bos_token and eos_token (null: the tokenizer has none, so the variable is undefined); messages;
add_generation_prompt; extra (the `tools` list and any other template variables, passed to
apply_chat_template as keyword arguments); expected or error {type, message}.

Re-run (from the repository root; versions in tools/requirements-fixtures.txt, transformers 5.23.0
and jinja2 3.1.6 under Python 3.11 when the file was made):
    python3 -m venv .venv-fixtures && .venv-fixtures/bin/pip install -r tools/requirements-fixtures.txt
    .venv-fixtures/bin/python tools/make_chat_template_goldens.py          # writes goldens.json
    .venv-fixtures/bin/python tools/make_chat_template_goldens.py --check  # verifies it
No case depends on the clock: every Llama-3.2 case passes date_string (its template otherwise
calls strftime_now), and every Mistral-Small-3.2 case a system message (its default one has
strftime_now's date). To add a case, add it in model_cases(), gemma_mistral_cases(),
gemma3_phi4_cases() or SNIPPETS and re-run; the C++ test (tests/runtime/chat/chat_template_test.cc)
replays every case and needs no change (a new template file also goes into its GoldenSetTest
list).
"""

import argparse
import json
import sys
import warnings
from pathlib import Path

import jinja2
import transformers
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "chat"
OUT = DATA / "goldens.json"

LLAMA_BOS, LLAMA_EOS = "<|begin_of_text|>", "<|eot_id|>"
QWEN_EOS = "<|im_end|>"  # Qwen's tokenizer_config.json has "bos_token": null
GEMMA_BOS, GEMMA_EOS = "<bos>", "<eos>"
MISTRAL_BOS, MISTRAL_EOS = "<s>", "</s>"
PHI4_BOS, PHI4_EOS = "<|endoftext|>", "<|im_end|>"

LLAMA31 = "templates/meta-llama-Llama-3.1-8B-Instruct.jinja"
LLAMA32 = "templates/meta-llama-Llama-3.2-3B-Instruct.jinja"
LLAMA33 = "templates/meta-llama-Llama-3.3-70B-Instruct.jinja"
QWEN25 = "templates/Qwen-Qwen2.5-7B-Instruct.jinja"
QWEN3 = "templates/Qwen-Qwen3-0.6B.jinja"
GEMMA2 = "templates/google-gemma-2-2b-it.jinja"
GEMMA3 = "templates/google-gemma-3-4b-it.jinja"
NEMO = "templates/mistralai-Mistral-Nemo-Instruct-2407.jinja"
SMALL32 = "templates/Mistral-Small-3.2-24B-Instruct-2506.jinja"
PHI4 = "templates/microsoft-phi-4.jinja"
LLAMAS = [LLAMA31, LLAMA32, LLAMA33]
QWENS = [QWEN25, QWEN3]
MISTRALS = [NEMO, SMALL32]
TOKENS = {LLAMA31: (LLAMA_BOS, LLAMA_EOS), LLAMA32: (LLAMA_BOS, LLAMA_EOS),
          LLAMA33: (LLAMA_BOS, LLAMA_EOS), QWEN25: (None, QWEN_EOS), QWEN3: (None, QWEN_EOS),
          GEMMA2: (GEMMA_BOS, GEMMA_EOS), NEMO: (MISTRAL_BOS, MISTRAL_EOS),
          SMALL32: (MISTRAL_BOS, MISTRAL_EOS), GEMMA3: (GEMMA_BOS, GEMMA_EOS),
          PHI4: (PHI4_BOS, PHI4_EOS)}

# ---- Conversations ------------------------------------------------------------------------------

SYSTEM = {"role": "system", "content": "You are a concise assistant."}
USER = {"role": "user", "content": "Hello! How are you?"}
ASSISTANT = {"role": "assistant", "content": "I'm fine, thanks. How can I help?"}
USER2 = {"role": "user", "content": "What is 2 + 2?"}

NON_ASCII = [
    {"role": "system", "content": "Réponds en français. Ünïcödé ✓"},
    {"role": "user", "content": "Привет! 你好，世界。 Emoji: 😀👍🏽👩‍💻🇫🇷 — «quotes» ‘single’"},
    {"role": "assistant", "content": "こんにちは 🎉 ½ ≠ ∞"},
    {"role": "user", "content": "\u00a0non-breaking\u00a0and\u3000ideographic spaces\u2028"},
]

ESCAPES = [
    {"role": "system", "content": "  Padded system prompt with trailing newline\n\n"},
    {"role": "user", "content": "Quotes \"double\" and 'single', backslash \\ and \\n literal,\n"
                                "a real newline, a\ttab, HTML <b>bold</b> & <script>x</script>, "
                                "braces {{ not jinja }} {% raw %} and a \u0007 bell."},
    {"role": "assistant", "content": "\n  Leading and trailing whitespace  \n"},
    {"role": "user", "content": "Unicode escapes: \u200b\u200d\ufeff, C1 \u0085, DEL \u007f."},
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city, in °C or °F.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string",
                             "description": "City and country, e.g. \"Paris, FR\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
                "detail": {"type": "object", "properties": {
                    "hourly": {"type": "boolean"},
                    "fields": {"type": "array", "items": {"type": "string"}},
                    "threshold": {"type": "number", "description": "0.5 means 50%"}},
                    "required": ["hourly"]},
            },
            "required": ["location"],
        },
    }},
    {"type": "function", "function": {
        "name": "search_web",
        "description": "Search the web. Returns <html> snippets & titles.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "max_results": {"type": ["integer", "null"]}},
            "required": ["query"]},
    }},
]

WEATHER_ARGS = {"location": "Zürich, CH", "unit": "celsius", "days": 2,
                "detail": {"hourly": True, "fields": ["temp", "wind"], "threshold": 0.25}}
WEATHER_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": WEATHER_ARGS}}
SEARCH_CALL = {"type": "function", "function": {
    "name": "search_web",
    "arguments": {"query": "\"jinja2\" <templates> & more", "max_results": None}}}
WEATHER_RESULT = '{"temperature": 21.5, "condition": "sunny ☀️", "wind_kph": 12}'

TOOL_TURNS = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "What's the weather in Zürich for two days?"},
    {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
    {"role": "tool", "name": "get_weather", "content": WEATHER_RESULT},
    {"role": "assistant", "content": "It is sunny and 21.5 °C."},
    {"role": "user", "content": "Thanks!"},
]

# Qwen3's template needs a string content next to tool calls (null is dropped, and the template
# then fails on the missing key: see qwen3_error_tool_call_without_content).
TOOL_TURNS_EMPTY_CONTENT = [dict(m, content="") if m["content"] is None else m for m in TOOL_TURNS]

PARALLEL_TOOL_TURNS = [
    {"role": "user", "content": "Weather in Zürich, and search for jinja2."},
    {"role": "assistant", "content": "Let me check both.",
     "tool_calls": [WEATHER_CALL, SEARCH_CALL]},
    {"role": "tool", "content": WEATHER_RESULT},
    {"role": "tool", "content": "[{\"title\": \"Jinja\", \"url\": "
                                "\"https://jinja.palletsprojects.com\"}]"},
]

STRING_ARGS_TURNS = [
    {"role": "user", "content": "Search for llamas."},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "search_web", "arguments": "{\"query\": \"llamas\", \"max_results\": 3}"}}]},
    {"role": "tool", "content": "No results."},
]

THINKING_TURNS = [
    {"role": "system", "content": "Think step by step."},
    {"role": "user", "content": "What is 17 * 3?"},
    {"role": "assistant", "content": "<think>\n17 * 3 = 51.\n</think>\n\nThe answer is 51."},
    {"role": "user", "content": "And 51 / 3?"},
    {"role": "assistant", "content": "<think>\nUndo the multiplication.\n</think>\n\n17."},
]

REASONING_FIELD_TURNS = [
    {"role": "user", "content": "Is 7 prime?"},
    {"role": "assistant", "content": "Yes, 7 is prime.", "reasoning_content": "Divisors: 1 and 7."},
    {"role": "user", "content": "And 9?"},
    {"role": "assistant", "content": "No.", "reasoning": "9 = 3 * 3."},
]

QWEN3_MULTI_STEP = [
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "<think>\nI need the tool.\n</think>\n\n",
     "tool_calls": [WEATHER_CALL]},
    {"role": "tool", "content": WEATHER_RESULT},
    {"role": "user", "content": "<tool_response>\nextra data\n</tool_response>"},
    {"role": "assistant", "content": "<think>\nGot it.\n</think>\n\nSunny, 21.5 °C."},
]

LLAMA_BUILTIN_TURNS = [
    {"role": "system", "content": "Use tools when useful."},
    {"role": "user", "content": "Search the latest news about llamas."},
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {
        "name": "brave_search", "arguments": {"query": "llama news"}}}]},
    {"role": "ipython", "content": {"results": ["Llamas are great", "Ünïcode"], "count": 2}},
]

LLAMA_CONTENT_PARTS = [
    {"role": "user", "content": [{"type": "text", "text": "Describe 'this'."},
                                 {"type": "text", "text": "Two parts, 1.5 and None and True."}]},
]

# Mistral's templates want a 9-character id on every tool call and tool result.
MISTRAL_WEATHER_CALL = dict(WEATHER_CALL, id="call0w3th")
MISTRAL_SEARCH_CALL = dict(SEARCH_CALL, id="Zs3arch01")

MISTRAL_TOOL_TURNS = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "What's the weather in Zürich for two days?"},
    {"role": "assistant", "content": None, "tool_calls": [MISTRAL_WEATHER_CALL]},
    {"role": "tool", "tool_call_id": "call0w3th", "name": "get_weather",
     "content": WEATHER_RESULT},
    {"role": "assistant", "content": "It is sunny and 21.5 °C."},
    {"role": "user", "content": "Thanks!"},
]

MISTRAL_PARALLEL_TOOL_TURNS = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Zürich, and search for jinja2."},
    {"role": "assistant", "tool_calls": [MISTRAL_WEATHER_CALL, MISTRAL_SEARCH_CALL]},
    {"role": "tool", "tool_call_id": "call0w3th", "content": WEATHER_RESULT},
    # A result under content.content, printed with |string: Python's repr of the object.
    {"role": "tool", "tool_call_id": "Zs3arch01",
     "content": {"content": {"title": "Jinja's docs", "score": 0.5, "ok": True, "next": None}}},
]

MISTRAL_STRING_ARGS_TURNS = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Search for llamas."},
    {"role": "assistant", "content": "", "tool_calls": [{
        "type": "function", "id": "abcDEF123", "function": {
            "name": "search_web", "arguments": "{\"query\": \"llamas\", \"max_results\": 3}"}}]},
    {"role": "tool", "tool_call_id": "abcDEF123", "content": "No results."},
]

# Content given as a list of blocks (system, user and assistant), images among them.
MISTRAL_CONTENT_BLOCKS = [
    {"role": "system", "content": [{"type": "text", "text": "Describe images briefly."}]},
    {"role": "user", "content": [{"type": "text", "text": "What is in "},
                                 {"type": "image_url", "image_url": {"url": "x.png"}},
                                 {"type": "text", "text": " and "}, {"type": "image"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "A cat and a dog."}]},
    {"role": "user", "content": "Thanks."},
]

SYSTEM2 = {"role": "system", "content": "From now on, answer in French."}


def case(name, template, messages, add_generation_prompt=True, **extra):
    bos, eos = TOKENS[template]
    return {"name": name, "template": template, "bos_token": bos, "eos_token": eos,
            "messages": messages, "add_generation_prompt": add_generation_prompt, "extra": extra}


def model_cases():
    cases = []
    short = {LLAMA31: "llama31", LLAMA32: "llama32", LLAMA33: "llama33",
             QWEN25: "qwen25", QWEN3: "qwen3"}
    date = {"date_string": "15 Mar 2025"}
    for t in LLAMAS + QWENS:
        s = short[t]
        # Llama-3.2 reads the clock unless date_string is given; the others default it.
        d = date if t == LLAMA32 else {}
        cases += [
            case(f"{s}_single_user", t, [USER], True, **d),
            case(f"{s}_single_user_no_generation_prompt", t, [USER], False, **d),
            case(f"{s}_system_user", t, [SYSTEM, USER], True, **d),
            case(f"{s}_multi_turn", t, [SYSTEM, USER, ASSISTANT, USER2], True, **d),
            case(f"{s}_multi_turn_ends_with_assistant", t, [USER, ASSISTANT], False, **d),
            case(f"{s}_non_ascii", t, NON_ASCII, True, **d),
            case(f"{s}_escapes", t, ESCAPES, True, **d),
            case(f"{s}_tools", t, TOOL_TURNS_EMPTY_CONTENT if t == QWEN3 else TOOL_TURNS, True,
                 tools=TOOLS, **d),
            case(f"{s}_tools_first_turn", t, [SYSTEM, USER], True, tools=TOOLS, **d),
        ]
    for t in LLAMAS:
        s = short[t]
        cases += [
            case(f"{s}_date_string", t, [USER], True, date_string="01 Jan 2030"),
            case(f"{s}_tools_in_system", t, TOOL_TURNS, True, tools=TOOLS,
                 tools_in_user_message=False, date_string="02 Feb 2025"),
            case(f"{s}_tool_result_object", t, LLAMA_BUILTIN_TURNS, True, tools=TOOLS,
                 date_string="03 Mar 2025"),
            case(f"{s}_content_parts", t, LLAMA_CONTENT_PARTS, True, date_string="04 Apr 2025"),
            case(f"{s}_custom_tools", t, [USER], True, custom_tools=TOOLS[1:],
                 date_string="05 May 2025"),
        ]
    for t in (LLAMA31, LLAMA33):
        s = short[t]
        cases.append(case(f"{s}_builtin_tools", t, LLAMA_BUILTIN_TURNS, True,
                          builtin_tools=["brave_search", "wolfram_alpha", "code_interpreter"]))
    for t in QWENS:
        s = short[t]
        cases += [
            case(f"{s}_parallel_tool_calls", t, PARALLEL_TOOL_TURNS, True, tools=TOOLS),
            case(f"{s}_string_arguments", t, STRING_ARGS_TURNS, True, tools=TOOLS),
            case(f"{s}_no_tools_tool_turns", t, PARALLEL_TOOL_TURNS, False),
        ]
    cases += [
        case("qwen3_thinking_history", QWEN3, THINKING_TURNS, False),
        case("qwen3_thinking_then_prompt", QWEN3, THINKING_TURNS + [USER2], True),
        case("qwen3_enable_thinking_false", QWEN3, [USER], True, enable_thinking=False),
        case("qwen3_enable_thinking_true", QWEN3, [USER], True, enable_thinking=True),
        case("qwen3_enable_thinking_false_no_prompt", QWEN3, [SYSTEM, USER], False,
             enable_thinking=False),
        case("qwen3_reasoning_fields", QWEN3, REASONING_FIELD_TURNS, False),
        case("qwen3_reasoning_fields_then_prompt", QWEN3, REASONING_FIELD_TURNS + [USER2], True,
             enable_thinking=False),
        case("qwen3_multi_step_tools", QWEN3, QWEN3_MULTI_STEP, True, tools=TOOLS),
        case("qwen3_system_not_first", QWEN3, [USER, SYSTEM, USER2], True),
        case("qwen25_system_not_first", QWEN25, [USER, SYSTEM, USER2], True),
    ]
    # Inputs the templates reject.
    two_calls = [USER, {"role": "assistant", "tool_calls": [WEATHER_CALL, SEARCH_CALL]}]
    for t in LLAMAS:
        s = short[t]
        cases.append(case(f"{s}_error_two_tool_calls", t, two_calls, True, tools=TOOLS,
                          date_string="06 Jun 2025"))
        cases.append(case(f"{s}_error_tools_without_user", t, [SYSTEM], True, tools=TOOLS,
                          date_string="07 Jul 2025"))
    cases.append(case("qwen3_error_tool_call_without_content", QWEN3, TOOL_TURNS, True,
                      tools=TOOLS))
    cases.append(case("qwen3_error_user_without_content", QWEN3,
                      [{"role": "user", "content": None}], True))
    cases.append(case("qwen25_error_assistant_without_content", QWEN25,
                      [USER, {"role": "assistant"}], True))
    return cases


def gemma_mistral_cases():
    """Gemma 2 (<start_of_turn>) and Mistral Nemo / Small 3.2 ([INST]): templates that raise
    unless user and assistant turns alternate."""
    g = GEMMA2
    cases = [
        case("gemma2_single_user", g, [USER], True),
        case("gemma2_single_user_no_generation_prompt", g, [USER], False),
        case("gemma2_multi_turn", g, [USER, ASSISTANT, USER2], True),
        case("gemma2_multi_turn_ends_with_assistant", g, [USER, ASSISTANT], False),
        # |trim strips the content (Python's str.strip: Unicode whitespace, \x85 included).
        case("gemma2_non_ascii", g, NON_ASCII[1:], True),
        case("gemma2_escapes", g, ESCAPES[1:], True),
        # The template ignores tools.
        case("gemma2_tools_ignored", g, [USER], True, tools=TOOLS),
        case("gemma2_error_system_role", g, [SYSTEM, USER], True),
        case("gemma2_error_two_user_turns", g, [USER, USER2], True),
        case("gemma2_error_starts_with_assistant", g, [ASSISTANT, USER], True),
        case("gemma2_error_tool_turn", g, [USER, ASSISTANT, {"role": "tool", "content": "x"}],
             True),
    ]
    short = {NEMO: "mistral_nemo", SMALL32: "mistral_small32"}
    for t in MISTRALS:
        s = short[t]
        # Small 3.2 puts today's date (strftime_now) in its default system prompt, so every one
        # of its cases brings a system message (chat_template_test.cc checks the default).
        sys_ = [SYSTEM] if t == SMALL32 else []
        if t == NEMO:
            cases.append(case(f"{s}_single_user", t, [USER], True))
        cases += [
            # Neither template reads add_generation_prompt.
            case(f"{s}_single_user_no_generation_prompt", t, sys_ + [USER], False),
            case(f"{s}_system_user", t, [SYSTEM, USER], True),
            case(f"{s}_multi_turn", t, [SYSTEM, USER, ASSISTANT, USER2], True),
            case(f"{s}_multi_turn_ends_with_assistant", t, sys_ + [USER, ASSISTANT], False),
            case(f"{s}_non_ascii", t, NON_ASCII, True),
            case(f"{s}_escapes", t, ESCAPES, True),
            case(f"{s}_tools", t, MISTRAL_TOOL_TURNS, True, tools=TOOLS),
            case(f"{s}_tools_first_turn", t, [SYSTEM, USER], True, tools=TOOLS),
            case(f"{s}_parallel_tool_calls", t, MISTRAL_PARALLEL_TOOL_TURNS, True, tools=TOOLS),
            case(f"{s}_string_arguments", t, MISTRAL_STRING_ARGS_TURNS, True, tools=TOOLS),
            case(f"{s}_no_tools_tool_turns", t, MISTRAL_PARALLEL_TOOL_TURNS, False),
            case(f"{s}_error_two_user_turns", t, sys_ + [USER, USER2], True),
            case(f"{s}_error_starts_with_assistant", t, sys_ + [ASSISTANT, USER], True),
            case(f"{s}_error_short_tool_call_id", t,
                 sys_ + [USER, {"role": "assistant", "tool_calls": [dict(WEATHER_CALL, id="c1")]}],
                 True, tools=TOOLS),
            case(f"{s}_error_tool_result_without_id", t,
                 sys_ + [USER, {"role": "assistant", "tool_calls": [MISTRAL_WEATHER_CALL]},
                         {"role": "tool", "content": WEATHER_RESULT}], True, tools=TOOLS),
            case(f"{s}_error_unknown_role", t,
                 sys_ + [USER, {"role": "ipython", "content": "x"}], True),
        ]
    cases += [
        # Nemo folds the first system message into the last user turn; any later one is an
        # unknown role. Small 3.2 prints a later one as another [SYSTEM_PROMPT].
        case("mistral_nemo_error_system_not_first", NEMO, [USER, SYSTEM, USER2], True),
        case("mistral_small32_system_mid_conversation", SMALL32,
             [SYSTEM, USER, SYSTEM2, USER2], True),
        case("mistral_small32_content_blocks", SMALL32, MISTRAL_CONTENT_BLOCKS, True),
        case("mistral_small32_error_tool_call_id_not_string", SMALL32,
             [SYSTEM, USER, {"role": "assistant",
                             "tool_calls": [dict(WEATHER_CALL, id=123456789)]}], True),
        case("mistral_small32_error_unsupported_block", SMALL32,
             [SYSTEM, {"role": "user", "content": [{"type": "audio", "audio": "x.wav"}]}], True),
        case("mistral_small32_error_unsupported_assistant_block", SMALL32,
             [SYSTEM, USER, {"role": "assistant", "content": [{"type": "image"},
                                                              {"type": "video"}]}], True),
    ]
    return cases


# ---- Snippets: one construct each ---------------------------------------------------------------

SNIPPETS = [
    # Whitespace control, trim_blocks, lstrip_blocks, comments.
    ("ws_trim_blocks", "{% if true %}\nA\n{% endif %}\nB\n", {}),
    ("ws_lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\ny", {}),
    ("ws_lstrip_not_variables", "  {{ 'v' }}\n  {% if true %}t{% endif %}", {}),
    ("ws_minus", "a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c", {}),
    ("ws_variable_minus", "a \n {{- 'x' -}} \n b {{ 'y' }} c", {}),
    ("ws_plus_disables_lstrip", "  {%+ if true %}x{% endif +%}\ny", {}),
    ("ws_comments", "a\n  {# comment #}\nb {#- strip -#}   c\n{# last #}", {}),
    ("ws_text_before_tag_on_line", "text {% if true %}\nx{% endif %}", {}),
    ("ws_crlf_and_trailing_newline", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", {}),
    ("ws_only_first_trailing_newline", "x\n\n", {}),
    ("ws_unicode_space_lstrip", "\u3000{% if true %}x{% endif %}", {}),
    # Literals and printing of Python values.
    ("print_values",
     "{{ none }}|{{ None }}|{{ true }}|{{ False }}|{{ 1.0 }}|{{ 1e3 }}|{{ 1e16 }}|{{ 0.0001 }}|"
     "{{ 1e-5 }}|{{ -0.0 }}|{{ 2.5e-10 }}|{{ 123456789012345678 }}", {}),
    ("print_containers",
     "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}|{{ (1,) }}|{{ () }}|{{ (1, 'b') }}|"
     "{{ {} }}|{{ [] }}", {}),
    ("print_string_repr",
     "{{ ['it\\'s', \"say \\\"hi\\\"\", 'both \\' \"', 'tab\\tnl\\n', '\\x00\\x7f\\u200b', 'é😀\\xa0'] }}",
     {}),
    ("print_dict_views",
     "{{ d.keys() }}|{{ d.values() }}|{{ d.items() }}", {"d": {"a": 1, "b": [2]}}),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\\\"f\\x41\\u00e9\\U0001F600\\101\\q' }}", {}),
    ("string_adjacent", "{{ 'a' \"b\" 'c' }}", {}),
    ("integer_literals", "{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1_000 }}|{{ 1_0.5_0 }}", {}),
    # Operators and precedence.
    ("precedence_filter_binds_tighter",
     "{{ '  x  ' | trim + '|' }}|{{ -3 | abs }}|{{ 'ab' ~ 1 + 2 if false else 'no' }}", {}),
    ("precedence_arithmetic",
     "{{ 1 + 2 * 3 ** 2 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|"
     "{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 4 / 2 }}|{{ 2 ** -1 }}|"
     "{{ 7.5 // 2 }}|{{ -7.5 % 2 }}", {}),
    ("concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ [1] ~ undefined_name }}", {}),
    ("comparison_chain",
     "{{ 1 < 2 < 3 }}|{{ 1 < 3 > 2 == 2 }}|{{ 3 > 2 > 2 }}|{{ 1 == 1.0 }}|{{ true == 1 }}|"
     "{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ [1, 2] == (1, 2) }}", {}),
    ("boolean_operators",
     "{{ none or 'x' }}|{{ 0 and 1 }}|{{ '' or [] }}|{{ 'a' and 'b' }}|{{ not 1 }}|"
     "{{ not none and 2 }}", {}),
    ("in_operator",
     "{{ 'b' in 'abc' }}|{{ 2 in [1, 2] }}|{{ 'k' in d }}|{{ 'v' in d }}|{{ 3 not in [1] }}|"
     "{{ 'x' in undefined_name }}", {"d": {"k": "v"}}),
    ("conditional_expression",
     "{{ 'a' if true else 'b' }}|{{ 'a' if false else 'b' if true else 'c' }}|{{ 'a' if false }}|"
     "{{ ('a' if false) is defined }}", {}),
    ("string_concat_and_repeat",
     "{{ 'ab' + 'cd' }}|{{ 'ab' * 3 }}|{{ [1] * 2 + [3] }}|{{ 2 * 'x' }}", {}),
    # Subscripts and slices.
    ("subscripts",
     "{{ l[0] }}|{{ l[-1] }}|{{ s[1] }}|{{ s[-1] }}|{{ d['k'] }}|{{ d.k }}|"
     "{{ l[10] is defined }}|{{ d.missing is defined }}|{{ l.0 }}",
     {"l": [1, 2, 3], "s": "héllo", "d": {"k": "v"}}),
    ("slices",
     "{{ l[1:] }}|{{ l[:-1] }}|{{ l[::-1] }}|{{ l[::2] }}|{{ l[-2:] }}|{{ l[5:] }}|"
     "{{ l[1:3:1] }}|{{ s[::-1] }}|{{ s[1:3] }}|{{ l[-100:100] }}|{{ l[3:0:-1] }}",
     {"l": [1, 2, 3, 4], "s": "añb😀"}),
    ("attribute_prefers_methods",
     "{{ d.items is defined }}|{{ d['items'] }}|{{ d.get('items') }}|{{ d.other }}",
     {"d": {"items": "key", "other": "o"}}),
    # Undefined handling.
    ("undefined_is_falsy_and_empty",
     "[{{ u }}]{% if not u %}falsy{% endif %}|{{ u | length }}|{% for x in u %}x{% endfor %}|"
     "{{ u is defined }}|{{ u is undefined }}|{{ u | default('dflt') }}|"
     "{{ none | default('n') }}|{{ '' | default('e', true) }}|{{ u == u }}|{{ u is none }}", {}),
    ("undefined_attribute_of_dict", "{{ d.a.b is defined }}", {"d": {"a": {}}}),
    # Filters.
    ("filter_trim_strip",
     "[{{ '  a b \\n' | trim }}]|[{{ 'xxaxx' | trim('x') }}]|[{{ '\\u3000z\\u00a0' | trim }}]", {}),
    ("filter_length_count",
     "{{ 'héllo😀' | length }}|{{ [1, 2] | count }}|{{ {'a': 1} | length }}", {}),
    ("filter_join",
     "{{ [1, 'a', none] | join(', ') }}|{{ l | join }}|{{ users | join('/', attribute='name') }}",
     {"l": ["x", "y"], "users": [{"name": "ann"}, {"name": "bob"}]}),
    ("filter_select_reject",
     "{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3] | reject('equalto', 2) | list }}|"
     "{{ [0, 1, '', 'a'] | select | list }}|{{ ['a', 'b'] | reject('in', ['a']) | join }}", {}),
    ("filter_selectattr",
     "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|"
     "{{ ms | rejectattr('role', '==', 'user') | list | length }}|"
     "{{ ms | selectattr('tool') | list | length }}",
     {"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "tool": 1},
             {"role": "user", "content": "c"}]}),
    ("filter_first_last",
     "{{ [1, 2, 3] | first }}|{{ [1, 2, 3] | last }}|{{ 'abc' | first }}|{{ 'abc' | last }}|"
     "{{ [] | first is defined }}", {}),
    ("filter_case",
     "{{ 'Hello World' | lower }}|{{ 'straße' | upper }}|{{ 'hELLO wORLD' | capitalize }}|"
     "{{ 'hello-world foo(bar) [x] <y>' | title }}|{{ \"they're bill's\" | title }}", {}),
    ("filter_default_string_list",
     "{{ u | default('x') }}|{{ 1 | string }}|{{ 'ab' | list }}|{{ d | list }}|"
     "{{ [1.5, none] | string }}", {"d": {"a": 1, "b": 2}}),
    ("filter_int_float",
     "{{ '42' | int }}|{{ '42.9' | int }}|{{ 'x' | int }}|{{ 'x' | int(7) }}|{{ 3.99 | int }}|"
     "{{ '0x1A' | int(0, 16) }}|{{ ' -1_000 ' | int }}|{{ '2.5' | float }}|{{ 'nan' | float }}|"
     "{{ 1 | float }}|{{ 'bad' | float }}|{{ true | int }}|{{ '٣' | int }}|{{ '１２' | float }}|"
     "{{ x | int(5) }}|{{ y | float | int(6) }}", {"x": "inf", "y": "nan"}),
    ("filter_replace",
     "{{ 'aaa' | replace('a', 'b') }}|{{ 'aaa' | replace('a', 'b', 2) }}|"
     "{{ 'ab' | replace('', '-') }}", {}),
    ("filter_items_and_map",
     "{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}|{{ d | items | list }}|"
     "{{ ['a', 'b'] | map('upper') | join }}", {"d": {"z": 1, "a": [2]}}),
    ("filter_reverse", "{{ 'abc' | reverse }}|{{ [1, 2, 3] | reverse | list }}", {}),
    ("filter_tojson",
     "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é<>&\\'\"\\n\\u0001' | tojson }}|"
     "{{ [1.0, 1e20, 0.1, -0.0, 3] | tojson }}|{{ none | tojson }}|"
     "{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=[',', ':']) }}|"
     "{{ 'é😀' | tojson(ensure_ascii=true) }}|{{ [] | tojson(indent=4) }}|{{ {'a': {}} |"
     " tojson(indent=0) }}|{{ d | tojson(indent='\\t') }}",
     {"d": {"z": [1, {"y": None}], "a": True, "m": "ünï"}}),
    # Tests.
    ("tests",
     "{{ 1 is number }}|{{ true is number }}|{{ 1 is integer }}|{{ true is integer }}|"
     "{{ 1.0 is float }}|{{ 's' is string }}|{{ d is mapping }}|{{ l is mapping }}|"
     "{{ l is iterable }}|{{ 's' is iterable }}|{{ 1 is iterable }}|{{ l is sequence }}|"
     "{{ d is sequence }}|{{ none is none }}|{{ false is false }}|{{ 0 is false }}|"
     "{{ true is true }}|{{ 3 is odd }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}|"
     "{{ 2 is in [1, 2] }}|{{ 'a' is equalto 'a' }}|{{ 1 is eq 2 }}|{{ 1 is lt 2 }}|"
     "{{ 'abc' is lower }}|{{ 'ABC' is upper }}|{{ none is not none }}|{{ x is sameas none }}|"
     "{{ true is boolean }}", {"d": {}, "l": [1], "x": None}),
    # Loops.
    ("loop_variables",
     "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
     "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|"
     "{{ loop.nextitem }}]{{ loop.cycle('o', 'e') }};{% endfor %}", {"l": ["a", "b", "c"]}),
    ("loop_filter_and_else",
     "{% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}|"
     "{% for x in [] %}no{% else %}empty{% endfor %}|"
     "{% for x in l if x > 9 %}no{% else %}none{% endfor %}", {"l": [1, 2, 3]}),
    ("loop_over_dict_and_string",
     "{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}|"
     "{% for c in 'añ😀' %}[{{ c }}]{% endfor %}|"
     "{% for a, b in [[1, 2], 'xy'] %}{{ a }}{{ b }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("loop_break_continue",
     "{% for x in l %}{% if x == 2 %}{% continue %}{% endif %}"
     "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {"l": [1, 2, 3, 4, 5]}),
    ("loop_nested",
     "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}"
     "{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("loop_scoping",
     "{% set x = 'outer' %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}"
     "({{ x }}){% endfor %}<{{ x }}>{% set i = 9 %}{% for i in [1] %}{% endfor %}{{ i }}", {}),
    ("namespace",
     "{% set ns = namespace(count=0, found=none) %}{% for m in l %}"
     "{% if m > 1 %}{% set ns.count = ns.count + 1 %}{% set ns.found = m %}"
     "{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}{{ ns.missing is defined }}",
     {"l": [1, 2, 3]}),
    ("set_forms",
     "{% set a, b = [1, 2] %}{{ a }}{{ b }}|{% set t %}x{{ a }}y{% endset %}{{ t }}|"
     "{% if true %}{% set z = 3 %}{% endif %}{{ z }}|{% set msgs = l[1:] %}{{ msgs }}",
     {"l": [1, 2, 3]}),
    ("range_and_dict",
     "{{ range(3) | list }}|{{ range(1, 7, 2) | list }}|{{ range(3, 0, -1) | list }}|"
     "{{ dict(a=1, b='x') }}|{% for i in range(2) %}{{ i }}{% endfor %}", {}),
    # String and dict methods.
    ("string_methods",
     "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|"
     "{{ 'xxhixx'.strip('x') }}|[{{ '  hi  '.lstrip() }}]|[{{ '  hi  '.rstrip() }}]|"
     "{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'Hello'.upper() }}|"
     "{{ 'Hello'.lower() }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'hello world'.title() }}|"
     "{{ 'hELLO'.capitalize() }}|{{ '-'.join(['a', 'b']) }}|"
     "{{ '<think>x</think>\\n\\nans'.split('</think>')[-1].lstrip('\\n') }}", {}),
    ("dict_methods",
     "{{ d.get('a') }}|{{ d.get('z') }}|{{ d.get('z', 0) }}|"
     "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}|{{ d.keys() | list }}|"
     "{{ d.values() | list }}", {"d": {"a": 1, "b": 2}}),
    ("generation_block", "{% generation %}gen{{ 1 }}{% endgeneration %}|x", {}),
    ("loop_else_after_break_or_continue",
     "{% for x in [1] %}{% continue %}{% else %}A{% endfor %}|"
     "{% for x in [1, 2] %}{% break %}{% else %}B{% endfor %}|"
     "{% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}C{% endfor %}|"
     "{% for x in [] %}{% else %}D{% endfor %}", {}),
    # select / reject / map / items are lazy generators: errors wait until they are iterated.
    ("lazy_generators",
     "{% set g = 5 | select('odd') %}{{ g is defined }}|{{ (l | items) is defined }}|"
     "{{ 'x' | reject('odd') is iterable }}|{{ l | map('int') | first }}|"
     "{% if 3 | map('upper') %}truthy{% endif %}", {"l": [1, 2]}),
    # jinja2 folds constant subexpressions at compile time, and a folded slice goes through the
    # sandbox's getitem (a TypeError becomes Undefined); a slice left to run time raises.
    ("constant_folding",
     "[{{ 1[::2] }}]|{{ not 1.5[1:] }}|{{ 'a' ~ true[:1] ~ 'b' }}|{{ {}[1:] is defined }}|"
     "{{ ('x' if 1[1:] else 'y') }}", {}),
    ("comment_open_at_the_very_end", "a{{ 1 }}{#", {}),
    # Folded to inf / nan: fine where jinja2 prints it at compile time or folds it further...
    ("non_finite_constants", "{{ 'inf' | float }}|{{ 1e309 }}|{{ ('nan' | float) is number }}|"
     "{{ [1e309] | length }}", {}),
    # Errors Jinja raises.
    ("error_raise_exception",
     "a{{ raise_exception('Only user/assistant roles are supported!') }}", {}),
    ("error_undefined_attribute_of_undefined", "{{ u.v }}", {}),
    ("error_missing_attribute_chain", "{{ d.a.b }}", {"d": {}}),
    ("error_add_undefined", "{{ u + 'x' }}", {}),
    ("error_str_plus_int", "{{ 'a' + 1 }}", {}),
    ("error_division_by_zero", "{{ 1 / 0 }}", {}),
    ("error_not_iterable", "{% for x in 5 %}{% endfor %}", {}),
    ("error_unsafe_method", "{{ l.append(1) }}", {"l": []}),
    ("error_tojson_undefined", "{{ u | tojson }}", {}),
    ("error_unknown_method", "{{ 'abc'.nosuch() }}", {}),
    ("error_compare_types", "{{ 1 < 'a' }}", {}),
    ("error_empty_separator", "{{ 'a'.split('') }}", {}),
    ("error_range_too_big", "{{ range(200000) | length }}", {}),
    ("error_slice_not_subscriptable", "{{ n[1:] }}", {"n": 5}),
    ("error_folded_slice_not_absorbed", "{% if 1[::2] %}x{% endif %}", {}),
    ("error_lazy_generator_iterated", "{{ 5 | select('odd') | list }}", {}),
    # ... but a NameError where its generated code has to name it at render time.
    ("error_non_finite_constant", "{{ x ~ ('inf' | float) }}", {"x": "a"}),
    ("error_non_finite_literal", "{{ x ~ 1e309 }}", {"x": "a"}),
    ("error_int_of_infinity", "{{ x | float | int }}", {"x": "inf"}),
    ("error_items_of_a_list", "{% for k, v in l | items %}{% endfor %}", {"l": [1]}),
]


# Content given as a list of parts: Gemma 3 prints text parts trimmed, <start_of_image> for an
# image part, and nothing for any other type.
GEMMA3_CONTENT_PARTS = [
    {"role": "system", "content": [{"type": "text", "text": "Describe images briefly."},
                                   {"type": "text", "text": "Only the first part is kept."}]},
    {"role": "user", "content": [{"type": "text", "text": "  What is in  "}, {"type": "image"},
                                 {"type": "text", "text": "and"},
                                 {"type": "image_url", "image_url": {"url": "x.png"}},
                                 {"type": "image", "url": "y.png"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "A cat and a dog.\n"}]},
    {"role": "user", "content": [{"type": "image"}]},
]


def gemma3_phi4_cases():
    """Gemma 3 (the system message folded into the first user turn, content parts and images,
    alternation enforced) and Phi-4 (<|im_start|>role<|im_sep|>, roles other than system, user
    and assistant dropped)."""
    g = GEMMA3
    cases = [
        case("gemma3_single_user", g, [USER], True),
        case("gemma3_single_user_no_generation_prompt", g, [USER], False),
        case("gemma3_system_user", g, [SYSTEM, USER], True),
        case("gemma3_multi_turn", g, [SYSTEM, USER, ASSISTANT, USER2], True),
        case("gemma3_multi_turn_no_system", g, [USER, ASSISTANT, USER2], True),
        case("gemma3_multi_turn_ends_with_assistant", g, [SYSTEM, USER, ASSISTANT], False),
        # Only the system message's first part is read, untrimmed; the turns' parts are trimmed.
        case("gemma3_content_parts", g, GEMMA3_CONTENT_PARTS, True),
        case("gemma3_text_parts", g, LLAMA_CONTENT_PARTS, False),
        case("gemma3_system_only", g, [SYSTEM], True),
        case("gemma3_non_ascii", g, NON_ASCII, True),
        case("gemma3_escapes", g, ESCAPES, True),
        case("gemma3_tools_ignored", g, [SYSTEM, USER], True, tools=TOOLS),
        # Alternation is checked on the turns after the first system message only: a later system
        # message in an assistant's place renders as a "system" turn.
        case("gemma3_system_in_assistant_place", g, [USER, SYSTEM2], True),
        case("gemma3_error_two_user_turns", g, [SYSTEM, USER, USER2], True),
        case("gemma3_error_starts_with_assistant", g, [SYSTEM, ASSISTANT, USER], True),
        case("gemma3_error_tool_turn", g, [USER, ASSISTANT, {"role": "tool", "content": "x"}],
             True),
        # transformers drops a null content, and an undefined one iterates as empty.
        case("gemma3_null_content", g, [USER, {"role": "assistant", "content": None}], False),
        case("gemma3_error_invalid_content_type", g, [USER, {"role": "assistant", "content": 42}],
             False),
        case("gemma3_error_system_parts_without_text", g,
             [{"role": "system", "content": [{"type": "image"}]}, USER], True),
    ]
    p = PHI4
    cases += [
        case("phi4_single_user", p, [USER], True),
        case("phi4_single_user_no_generation_prompt", p, [USER], False),
        case("phi4_system_user", p, [SYSTEM, USER], True),
        case("phi4_multi_turn", p, [SYSTEM, USER, ASSISTANT, USER2], True),
        case("phi4_multi_turn_no_system", p, [USER, ASSISTANT, USER2], True),
        case("phi4_multi_turn_ends_with_assistant", p, [SYSTEM, USER, ASSISTANT], False),
        # Content is printed as given: no trimming, and nothing enforces alternation.
        case("phi4_non_ascii", p, NON_ASCII, True),
        case("phi4_escapes", p, ESCAPES, True),
        case("phi4_two_system_messages_and_two_user_turns", p, [SYSTEM, SYSTEM2, USER, USER2],
             True),
        # Tool turns and tool calls are dropped, and the tools list is ignored.
        case("phi4_tool_turns_dropped", p, TOOL_TURNS_EMPTY_CONTENT, True, tools=TOOLS),
        case("phi4_error_null_content", p, [USER, {"role": "assistant", "content": None}], False),
    ]
    return cases


def snippet_cases():
    cases = []
    for name, source, extra in SNIPPETS:
        cases.append({"name": f"snippet_{name}", "source": source, "bos_token": "<s>",
                      "eos_token": "</s>", "messages": [{"role": "user", "content": "hi"}],
                      "add_generation_prompt": False, "extra": extra})
    return cases


# ---- Rendering ----------------------------------------------------------------------------------

def tokenizer_for(bos, eos):
    backend = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    kwargs = {}
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    return PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)


def render(c):
    source = c["source"] if "source" in c else (DATA / c["template"]).read_text(encoding="utf-8")
    tok = tokenizer_for(c["bos_token"], c["eos_token"])
    tok.chat_template = source
    extra = dict(c["extra"])
    tools = extra.pop("tools", None)
    # apply_chat_template copies the messages; the case keeps the originals (nulls included).
    messages = json.loads(json.dumps(c["messages"]))
    try:
        text = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=c["add_generat"
                                                                                      "ion_prompt"],
                                       tokenize=False, **extra)
    except Exception as e:  # noqa: BLE001 - every failure becomes an error golden
        return {"error": {"type": type(e).__name__, "message": str(e)}}
    return {"expected": text}


def build():
    cases = model_cases() + gemma_mistral_cases() + gemma3_phi4_cases() + snippet_cases()
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        sys.exit("duplicate case names")
    for c in cases:
        c.update(render(c))
        # Cases named *_error_* must fail, all others must render.
        if ("error" in c) != ("_error_" in c["name"]):
            sys.exit(f"{c['name']}: " + (f"unexpected error {c['error']}" if "error" in c
                                         else "expected an error"))
    goldens = {"generator": "tools/make_chat_template_goldens.py",
               "transformers_version": transformers.__version__,
               "jinja2_version": jinja2.__version__,
               "cases": cases}
    return json.dumps(goldens, ensure_ascii=False, indent=1) + "\n"


def main():
    # Templates that slice a literal (snippet_constant_folding) make Python warn while jinja2
    # compiles them; the warning is expected.
    warnings.filterwarnings("ignore", category=SyntaxWarning)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail unless the committed goldens.json equals a fresh one")
    args = parser.parse_args()
    text = build()
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            sys.exit(f"out of date: {OUT.relative_to(ROOT)} (re-run without --check)")
        print("goldens.json is up to date")
        return
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.encode('utf-8'))} bytes)")


if __name__ == "__main__":
    main()
