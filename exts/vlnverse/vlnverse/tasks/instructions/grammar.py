"""Small English helpers for template output: articles, plurals, number words, list joining.

They are deliberately rule-based (no NLP dependency) and cover the vocabulary of household
scenes: ``indefinite_article("umbrella") == "an"``, ``plural("shelf") == "shelves"``,
``join_list(["a sofa", "a lamp", "a rug"]) == "a sofa, a lamp, and a rug"``.
"""
from __future__ import annotations

import re

# Words whose written first letter misleads the a/an rule.
_AN_EXCEPTIONS = ("hour", "honest", "honor", "honour", "heir", "herb")
_A_EXCEPTIONS = ("uni", "use", "usu", "uter", "eu", "one", "once", "ewe", "ukulele", "urinal", "utensil")
# Acronyms read letter by letter: "an LED lamp", "a TV".
_VOWEL_SOUND_LETTERS = set("AEFHILMNORSX")

_IRREGULAR_PLURALS = {
    "person": "people", "man": "men", "woman": "women", "child": "children", "mouse": "mice",
    "foot": "feet", "tooth": "teeth", "knife": "knives", "shelf": "shelves", "leaf": "leaves",
    "loaf": "loaves", "half": "halves", "wolf": "wolves", "life": "lives", "wife": "wives",
    "scarf": "scarves", "series": "series", "sheep": "sheep", "fish": "fish", "glasses": "glasses",
    "cactus": "cacti", "tv": "TVs", "TV": "TVs", "couch": "couches", "sofa": "sofas", "piano": "pianos",
    "photo": "photos", "radio": "radios", "stereo": "stereos", "potato": "potatoes", "tomato": "tomatoes",
}

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                 "ten", "eleven", "twelve")
_ORDINALS = ("zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
             "ninth", "tenth", "eleventh", "twelfth")


def indefinite_article(phrase: str) -> str:
    """``"a"`` or ``"an"`` for the noun phrase ``phrase``, judged by the sound of its first word."""
    word = phrase.strip().split(" ")[0] if phrase.strip() else ""
    if not word:
        return "a"
    if len(word) > 1 and word.isupper():  # acronym: letter name decides ("an LCD", "a TV")
        return "an" if word[0] in _VOWEL_SOUND_LETTERS else "a"
    low = word.lower()
    if len(low) > 1 and low[1] == "-":  # letter compounds read by letter name: "a U-turn", "an X-ray"
        return "an" if word[0].upper() in _VOWEL_SOUND_LETTERS else "a"
    if low.startswith(_AN_EXCEPTIONS):
        return "an"
    if low.startswith(_A_EXCEPTIONS):
        return "a"
    return "an" if low[0] in "aeiou" else "a"


def with_article(phrase: str, determiner: str = "a") -> str:
    """Prefix ``phrase`` with a determiner; ``"a"`` becomes ``"a"``/``"an"`` as the phrase needs."""
    if determiner in ("a", "an"):
        return f"{indefinite_article(phrase)} {phrase}"
    return f"{determiner} {phrase}" if determiner else phrase


def plural(noun_phrase: str) -> str:
    """Plural of a noun phrase: the last word is inflected (``"coffee table"`` → ``"coffee tables"``)."""
    head, _, last = noun_phrase.rpartition(" ")
    prefix = f"{head} " if head else ""
    if last in _IRREGULAR_PLURALS:
        return prefix + _IRREGULAR_PLURALS[last]
    low = last.lower()
    for singular, pl in _IRREGULAR_PLURALS.items():  # compounds such as "bookshelf"
        if len(singular) > 3 and low.endswith(singular) and low != singular:
            return prefix + last[: len(last) - len(singular)] + pl
    if last.isupper() and len(last) > 1:
        return prefix + last + "s"
    if re.search(r"(s|x|z|ch|sh)$", low):
        return prefix + last + "es"
    if re.search(r"[^aeiou]y$", low):
        return prefix + last[:-1] + "ies"
    if low.endswith("fe"):
        return prefix + last[:-2] + "ves"
    return prefix + last + "s"


def number_word(n: int) -> str:
    """``2`` → ``"two"`` for 0–12, digits otherwise."""
    return _NUMBER_WORDS[n] if 0 <= n < len(_NUMBER_WORDS) else str(n)


def ordinal_word(n: int) -> str:
    """``2`` → ``"second"`` for 0–12, ``"13th"`` style otherwise."""
    if 0 <= n < len(_ORDINALS):
        return _ORDINALS[n]
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def count_phrase(n: int, noun_phrase: str) -> str:
    """``count_phrase(2, "chair") == "two chairs"``, ``count_phrase(1, "chair") == "one chair"``."""
    return f"{number_word(n)} {noun_phrase if n == 1 else plural(noun_phrase)}"


def join_list(items: list[str], conjunction: str = "and") -> str:
    """Join with commas and a serial comma: ``a``, ``a and b``, ``a, b, and c``."""
    items = [i for i in items if i]
    if len(items) <= 1:
        return items[0] if items else ""
    if len(items) == 2:
        return f"{items[0]} {conjunction} {items[1]}"
    return f"{', '.join(items[:-1])}, {conjunction} {items[-1]}"


def capitalize_first(text: str) -> str:
    """Upper-case the first letter only (``"tV"`` stays, ``"walk past"`` → ``"Walk past"``)."""
    for i, ch in enumerate(text):
        if ch.isalpha():
            return text[:i] + ch.upper() + text[i + 1:]
    return text


def finish_sentence(text: str, end: str = ".") -> str:
    """Capitalise the first letter and add ``end`` unless the text already ends with punctuation."""
    text = text.rstrip()
    text = capitalize_first(text)
    return text if text[-1:] in ".!?" else text + end
