#!/usr/bin/env python3
"""Trains a small CLIP-style tokenizer on the test corpus: byte-level BPE whose word-final
symbols carry "</w>", CLIP's normalizer (NFC, whitespace runs to one space, lowercase), CLIP's
split regex and <|startoftext|> A <|endoftext|> around each text. Training is deterministic:
the most frequent pair wins, ties go to the smallest pair, no randomness.

The committed tests/data/text/clip_bpe_tokenizer.json is this script's output, so the CLIP
pipeline can run end to end on a tokenizer we made ourselves. With --expected the script also
encodes the corpus with a plain Python encoder written the way OpenAI's CLIP tokenizer works
(merge the lowest-ranked pair everywhere, repeat), the reference for mminfer's BPE path.

    train_bpe.py --corpus tests/data/text/corpus.txt --out tests/data/text/clip_bpe_tokenizer.json
    train_bpe.py --corpus ... --check tests/data/text/clip_bpe_tokenizer.json --expected OUT.json
"""
import argparse
import collections
import json
import re
import sys
import unicodedata

from text_corpus import byte_alphabet, read_cases, write_json

SOT, EOT = "<|startoftext|>", "<|endoftext|>"
SPLIT_PATTERN = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
MAX_MERGES = 2000
CONTEXT = 77


def normalize(text):
    text = unicodedata.normalize("NFC", text)
    text = re.sub(r"\s+", " ", text)
    return "".join(ch.lower() for ch in text)  # per character, as the Rust Lowercase normalizer


def is_letter(ch):
    return unicodedata.category(ch).startswith("L")


def is_number(ch):
    return unicodedata.category(ch).startswith("N")


def split_words(text):
    """CLIP's regex, spelled out: contractions, letter runs, single numbers, runs of other
    non-space characters; whitespace between them is dropped."""
    words, i = [], 0
    while i < len(text):
        ch = text[i]
        contraction = next((c for c in ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d") if text.startswith(c, i)), None)
        if contraction:
            j = i + len(contraction)
        elif is_letter(ch):
            j = i + 1
            while j < len(text) and is_letter(text[j]):
                j += 1
        elif is_number(ch):
            j = i + 1
        elif not ch.isspace():
            j = i + 1
            while j < len(text) and not (text[j].isspace() or is_letter(text[j]) or is_number(text[j])):
                j += 1
        else:
            i += 1
            continue
        words.append(text[i:j])
        i = j
    return words


def word_symbols(word, alphabet):
    chars = [alphabet[b] for b in word.encode("utf-8")]
    chars[-1] += "</w>"
    return tuple(chars)


def train(text, alphabet):
    counts = collections.Counter(word_symbols(w, alphabet) for w in split_words(normalize(text)))
    merges = []
    while len(merges) < MAX_MERGES:
        pairs = collections.Counter()
        for symbols, n in counts.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        merges.append(best)
        merged = collections.Counter()
        for symbols, n in counts.items():
            merged[merge_pair(symbols, best)] += n
        counts = merged
    return merges


def merge_pair(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def build_vocab(alphabet, merges):
    # CLIP's order: the byte alphabet (printable bytes first), the same with "</w>", merges, specials.
    order = [b for b in range(256) if alphabet[b] == chr(b)] + [b for b in range(256) if alphabet[b] != chr(b)]
    tokens = [alphabet[b] for b in order] + [alphabet[b] + "</w>" for b in order] + ["".join(m) for m in merges]
    vocab = {}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    vocab[SOT] = len(vocab)
    vocab[EOT] = len(vocab)
    return vocab


def tokenizer_json(vocab, merges):
    added = lambda t: {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                       "normalized": False, "special": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added(SOT), added(EOT)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFC"},
            {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
            {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT_PATTERN}, "behavior": "Removed", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "RobertaProcessing", "sep": [EOT, vocab[EOT]], "cls": [SOT, vocab[SOT]],
                           "trim_offsets": False, "add_prefix_space": False},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            {"type": "Replace", "pattern": {"String": "</w>"}, "content": " "},
            {"type": "Strip", "content": " ", "start": 0, "stop": 1}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": EOT, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def encode_word(symbols, ranks):
    word = list(symbols)
    while len(word) > 1:
        best = min(zip(word, word[1:]), key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        word = list(merge_pair(tuple(word), best))
    return word


def encode(text, vocab, ranks, alphabet):
    ids, rest = [], text
    while rest:  # special tokens in the text are kept whole, as added tokens are
        hits = [(rest.find(s), s) for s in (SOT, EOT) if rest.find(s) >= 0]
        if not hits:
            break
        at, special = min(hits)
        ids += encode_plain(rest[:at], vocab, ranks, alphabet) + [vocab[special]]
        rest = rest[at + len(special):]
    return ids + encode_plain(rest, vocab, ranks, alphabet)


def encode_plain(text, vocab, ranks, alphabet):
    return [vocab[s] for w in split_words(normalize(text)) for s in encode_word(word_symbols(w, alphabet), ranks)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", help="write the tokenizer.json here")
    ap.add_argument("--check", help="fail unless this file equals what training gives")
    ap.add_argument("--expected", help="write reference encodings of the corpus here")
    args = ap.parse_args()
    alphabet = byte_alphabet()
    cases = read_cases(args.corpus)
    merges = train(cases[-1], alphabet)
    vocab = build_vocab(alphabet, merges)
    text = json.dumps(tokenizer_json(vocab, merges), ensure_ascii=False, indent=1) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"{args.out}: {len(vocab)} tokens, {len(merges)} merges")
    if args.check:
        with open(args.check, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{args.check} differs from what tools/train_bpe.py trains now; regenerate it with --out")
    if args.expected:
        ranks = {m: i for i, m in enumerate(merges)}
        sot, eot = vocab[SOT], vocab[EOT]
        expected = []
        for case in cases:
            ids = [sot] + encode(case, vocab, ranks, alphabet) + [eot]
            fitted = ids[:CONTEXT - 1] + [eot] if len(ids) > CONTEXT else ids  # truncate, keep the end token
            expected.append({"text": case, "ids": ids, "ids_77": fitted + [eot] * (CONTEXT - len(fitted)),
                             "mask_77": [1] * len(fitted) + [0] * (CONTEXT - len(fitted))})
        write_json(args.expected, {"cases": expected})


if __name__ == "__main__":
    main()
