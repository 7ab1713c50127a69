#!/usr/bin/env python3
"""Builds small WordPiece tokenizers from the test corpus and the ids a plain Python BERT
tokenizer gives for it: the reference for mminfer's WordPiece path.

The vocabulary: BERT's special tokens, words seen at least twice, every character seen
(as a word start and as a "##" continuation) except a few left out on purpose so [UNK]
appears, and the "##" bigrams and trigrams seen at least twice, so the greedy
longest-match-first search has choices to make. max_input_chars_per_word is 16 so that
the corpus's long digit run exceeds it.

The reference below follows the original BERT tokenization.py algorithm (BasicTokenizer +
WordpieceTokenizer), written out plainly: clean text, spaces around CJK ideographs,
whitespace split, lowercase and strip accents (uncased), split on punctuation, then greedy
longest-match-first WordPiece per word.

    make_wordpiece_vocab.py --corpus tests/data/text/corpus.txt --out DIR

writes DIR/wordpiece_{uncased,cased}.tokenizer.json and .expected.json
({"cases": [{"text", "pair", "ids", "type_ids"}]}).
"""
import argparse
import collections
import os
import unicodedata

from text_corpus import read_cases, write_json

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LEFT_OUT = set("zq\u00df\U0001F600\u2764")  # characters given no piece at all: their words become [UNK]
MAX_CHARS = 16


# --- BERT's BasicTokenizer ----------------------------------------------------------------------
def is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text, uncased):
    cleaned = []
    for ch in text:
        if ord(ch) == 0 or ord(ch) == 0xFFFD or is_control(ch):
            continue
        cleaned.append(" " if is_whitespace(ch) else ch)
    spaced = "".join(f" {ch} " if is_cjk(ord(ch)) else ch for ch in cleaned)
    words = []
    for token in spaced.split():
        if uncased:
            # Per character, as the Rust tokenizers do (str.lower would apply final-sigma rules).
            token = "".join(ch.lower() for ch in token)
            token = "".join(ch for ch in unicodedata.normalize("NFD", token) if unicodedata.category(ch) != "Mn")
        current = ""
        for ch in token:
            if is_punctuation(ch):
                if current:
                    words.append(current)
                words.append(ch)
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
    return words


def wordpiece(word, vocab):
    if len(word) > MAX_CHARS:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            candidate = ("##" if start else "") + word[start:end]
            if candidate in vocab:
                break
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(("##" if start else "") + word[start:end])
        start = end
    return pieces


def tokenize(text, vocab, uncased):
    """Special tokens written in the text are kept whole, as the tokenizer's added tokens are."""
    tokens, rest = [], text
    while rest:
        hits = [(rest.find(s), s) for s in SPECIALS if rest.find(s) >= 0]
        if not hits:
            break
        at, special = min(hits, key=lambda h: (h[0], -len(h[1])))
        tokens += [p for w in basic_tokenize(rest[:at], uncased) for p in wordpiece(w, vocab)] + [special]
        rest = rest[at + len(special):]
    tokens += [p for w in basic_tokenize(rest, uncased) for p in wordpiece(w, vocab)]
    return tokens


# --- vocabulary -------------------------------------------------------------------------------
def build_vocab(cases, uncased):
    words = collections.Counter(w for w in basic_tokenize(cases[-1], uncased) if w not in SPECIALS)
    grams = collections.Counter()
    chars = set()
    for word, count in words.items():
        chars.update(word)
        for n in (2, 3):
            for i in range(1, len(word) - n + 1):
                grams["##" + word[i:i + n]] += count
    tokens = list(SPECIALS)
    tokens += sorted(w for w, c in words.items() if c >= 2 and not (set(w) & LEFT_OUT))
    tokens += sorted(c for c in chars if c not in LEFT_OUT)
    tokens += sorted("##" + c for c in chars if c not in LEFT_OUT)
    tokens += sorted(g for g, c in grams.items() if c >= 2 and not (set(g) & LEFT_OUT))
    seen, vocab = set(), []
    for t in tokens:
        if t not in seen:
            seen.add(t)
            vocab.append(t)
    return vocab


def tokenizer_json(vocab, uncased):
    ids = {t: i for i, t in enumerate(vocab)}
    special = lambda t: {"id": t, "type_id": 0}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": ids[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for t in SPECIALS],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": uncased},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": special("[CLS]")}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": special("[SEP]")}],
            "pair": [{"SpecialToken": special("[CLS]")}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": special("[SEP]")}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")},
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": MAX_CHARS, "vocab": ids},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cases = read_cases(args.corpus)
    for name, uncased in (("wordpiece_uncased", True), ("wordpiece_cased", False)):
        vocab = build_vocab(cases, uncased)
        ids = {t: i for i, t in enumerate(vocab)}
        expected = []
        for text in cases:
            tokens = ["[CLS]"] + tokenize(text, ids, uncased) + ["[SEP]"]
            expected.append({"text": text, "ids": [ids[t] for t in tokens], "type_ids": [0] * len(tokens)})
        # Pairs: consecutive lines, the second sequence with type id 1.
        for first, second in zip(cases[0:-1:7], cases[1:-1:7]):
            a, b = tokenize(first, ids, uncased), tokenize(second, ids, uncased)
            tokens = ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"]
            expected.append({"text": first, "pair": second, "ids": [ids[t] for t in tokens],
                             "type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1)})
        write_json(os.path.join(args.out, name + ".tokenizer.json"), tokenizer_json(vocab, uncased), compact=False)
        write_json(os.path.join(args.out, name + ".expected.json"), {"cases": expected})
        unk = sum(c["ids"].count(ids["[UNK]"]) for c in expected[:len(cases)])
        print(f"{name}: {len(vocab)} tokens, {len(expected)} cases, {unk} [UNK]")


if __name__ == "__main__":
    main()
