"""A question the reader types instead of a built-in prompt, and its rule rewards: pure Python, no torch.

The typed text is the user's message as it is (the chat template wraps it, engine/prompts.py). Checked
here so every entry point (the page's form, the JSON API, the step) refuses the same things with the same
words: an empty text, more than MAX_PROMPT_CHARS characters, control characters (tab and newline are
text; a browser's CRLF is read as a newline) and the chat template's turn markers (`<|im_end|>` would end
the user's turn inside the message). An expected answer is one line of at most MAX_EXPECTED_CHARS.

The rewards, each a rule a reader can check by eye, as the built-in prompts' (tasks.py):

- accuracy (only with an expected answer): 1.0 when the reply's last number equals the expected number
  (numerically: 42 = 42.0, 1,000 = 1000), or, for an expected answer that is not a number, when it appears
  in the reply as a whole word or phrase, in any case;
- format: 0.2 when the reply is a finished sentence (its last character is '.', '!' or '?'), or its last
  line is the expected answer alone: a reply cut at the token limit earns nothing here;
- length: -0.2 when the reply has more than LENGTH_LIMIT words.

Without an expected answer only format and length pay (the page says that accuracy needs one).
"""
from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation

from app.kinds.smollm.domain.tasks import RewardPart, Task, words

MAX_PROMPT_CHARS = 2000
MAX_EXPECTED_CHARS = 200
OWN_TASK_NAME = "your-question"
ACCURACY, FORMAT, LENGTH_PENALTY = 1.0, 0.2, -0.2
LENGTH_LIMIT = 30  # words

# ChatML's turn markers (<|im_start|>, <|im_end|>, <|endoftext|>): the tokenizer reads them as control tokens
_MARKER = re.compile(r"<\|[A-Za-z0-9_]+\|>")
# A number as people write it: an optional minus, digits (thousands grouped by commas or not), an optional
# decimal part. "1,000" is one number; "1,2" is two.
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
_SENTENCE_END = (".", "!", "?")


# -- the typed text ----------------------------------------------------------------------------------

def _refuse_controls(text: str, what: str, *, lines: bool) -> None:
    for char in text:
        if char == "\t" or (lines and char == "\n"):
            continue
        if unicodedata.category(char) in ("Cc", "Cs"):
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            raise ValueError(f"{what} may not contain control characters ({name}); "
                             f"{'tabs and line breaks are fine' if lines else 'one line of text'}")


def check_prompt(text: str) -> str:
    """The typed question as the step uses it (CRLF read as a newline, outer spaces stripped), or ValueError
    saying what is wrong."""
    text = text.replace("\r\n", "\n").strip()
    if not text:
        raise ValueError("your question is empty: type one, or leave the field out to use a built-in prompt")
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError(f"your question has {len(text):,} characters; at most {MAX_PROMPT_CHARS:,} fit")
    _refuse_controls(text, "your question", lines=True)
    marker = _MARKER.search(text)
    if marker:
        raise ValueError(f"your question may not contain the chat template's marker {marker.group(0)}: "
                         "the model would read it as the end of your message")
    return text


def check_expected(text: str) -> str | None:
    """The expected answer stripped (None when blank), or ValueError."""
    text = text.strip()
    if not text:
        return None
    if len(text) > MAX_EXPECTED_CHARS:
        raise ValueError(f"the expected answer has {len(text):,} characters; at most {MAX_EXPECTED_CHARS} fit")
    _refuse_controls(text, "the expected answer", lines=False)
    if _MARKER.search(text):
        raise ValueError("the expected answer may not contain the chat template's markers (<|...|>)")
    return text


# -- numbers -----------------------------------------------------------------------------------------

def as_number(text: str) -> Decimal | None:
    """`text` as a number when it is one number alone ("42", "-3", "1,000", "42.0"), else None."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    return _decimal(text)


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:  # pragma: no cover  (the pattern only lets decimals through)
        return None


def numbers_in(text: str) -> list[Decimal]:
    """Every number in `text`, in order. A minus right after a letter or digit is a hyphen ("5-3": 5 and 3);
    "1,000" is one number, "1,2" two."""
    found = []
    for match in _NUMBER.finditer(text):
        start, token = match.start(), match.group(0)
        before = text[start - 1] if start > 0 else ""
        if token.startswith("-"):
            if before.isalnum():
                token = token[1:]  # a hyphen, not a minus
        elif before.isdigit() or before == ".":
            continue  # the tail of a run like "1.2.3"
        value = _decimal(token)
        if value is not None:
            found.append(value)
    return found


def last_number(text: str) -> Decimal | None:
    found = numbers_in(text)
    return found[-1] if found else None


# -- the rules ---------------------------------------------------------------------------------------

def _phrase(expected: str) -> re.Pattern[str]:
    """The expected text as a whole word or phrase, any case, any run of spaces between its words."""
    body = r"\s+".join(re.escape(part) for part in expected.split())
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def _quoted(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def accuracy(expected: str) -> RewardPart:
    number = as_number(expected)
    if number is not None:
        def by_number(reply: str) -> float:
            return ACCURACY if last_number(reply) == number else 0.0
        return RewardPart("accuracy", by_number,
                          f"{ACCURACY:g} when the last number in the reply equals {_quoted(expected)}, as a number "
                          "(42 = 42.0, 1,000 = 1000): the answer, wherever the reply puts it last.")
    pattern = _phrase(expected)
    return RewardPart("accuracy", lambda reply: ACCURACY if pattern.search(reply) else 0.0,
                      f"{ACCURACY:g} when the reply contains '{_quoted(expected)}' as a whole word or phrase, "
                      "in any case: the right answer, wherever it is.")


def _is_answer_line(line: str, expected: str) -> bool:
    line = line.strip().rstrip(".!?").strip()
    number = as_number(expected)
    if number is not None:
        return as_number(line) == number
    return line.casefold() == expected.casefold()


def ends_finished(expected: str | None) -> RewardPart:
    def rule(reply: str) -> float:
        text = reply.strip()
        if not text:
            return 0.0
        if text.endswith(_SENTENCE_END):
            return FORMAT
        return FORMAT if expected is not None and _is_answer_line(text.splitlines()[-1], expected) else 0.0
    also = " or its last line is the expected answer alone" if expected is not None else ""
    return RewardPart("format", rule, f"{FORMAT:g} when the reply ends with '.', '!' or '?'{also}: a finished "
                                      "reply, not one cut off at the token limit.")


def length_penalty(limit: int = LENGTH_LIMIT) -> RewardPart:
    return RewardPart("length", lambda reply: LENGTH_PENALTY if len(words(reply)) > limit else 0.0,
                      f"{LENGTH_PENALTY:g} when the reply has more than {limit} words: a small penalty for "
                      "rambling.")


def own_task(text: str, expected: str | None = None) -> Task:
    """The typed question as a task: accuracy (with an expected answer), format and length."""
    text = check_prompt(text)
    expected = check_expected(expected) if expected is not None else None
    parts = (accuracy(expected),) if expected is not None else ()
    return Task(OWN_TASK_NAME, text, expected or "", (*parts, ends_finished(expected), length_penalty()))


NO_ACCURACY = ("No expected answer, so no accuracy reward: accuracy needs an expected answer; only format and "
               "length pay.")
