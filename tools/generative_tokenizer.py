"""A small GPT-2-style byte-level BPE tokenizer for the generative test models, trained here on
the test corpus (deterministic: most frequent pair first, ties to the smallest pair), and a
plain Python encoder for ASCII prompts that the torch references start from.

The tokenizer.json it writes is the layout GPT-2 / SmolLM publish: a ByteLevel pre-tokenizer
(GPT-2's split regex), a BPE model over the 256 byte symbols plus merges, a ByteLevel decoder
and the special tokens as added tokens after the merges."""
import collections
import re

from text_corpus import byte_alphabet

# GPT-2's split regex restricted to ASCII letters and digits: exact for ASCII text, which is
# all the prompts are (the C++ side uses the full Unicode regex).
ASCII_SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def _words(text):
    return ASCII_SPLIT.findall(text)


def train(corpus_text, num_merges):
    """Returns (vocab: symbol -> id, merges: list of (a, b)) over byte-level symbols."""
    alphabet = byte_alphabet()
    ascii_text = corpus_text.encode("ascii", "ignore").decode("ascii")
    counts = collections.Counter(_words(ascii_text))
    words = {tuple(alphabet[b] for b in w.encode("utf-8")): n for w, n in counts.items()}
    vocab = {alphabet[b]: i for i, b in enumerate(sorted(alphabet, key=lambda b: ord(alphabet[b])))}
    merges = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for symbols, n in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        vocab[best[0] + best[1]] = len(vocab)
        words = {_merge(symbols, best): n for symbols, n in words.items()}
    return vocab, merges


def _merge(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def encode(text, vocab, merges):
    """Ids of ASCII text: per word, merge the lowest-ranked pair until none applies."""
    if not text.isascii():
        raise ValueError("the reference encoder handles ASCII prompts only")
    alphabet = byte_alphabet()
    rank = {pair: i for i, pair in enumerate(merges)}
    ids = []
    for word in _words(text):
        symbols = tuple(alphabet[b] for b in word.encode("utf-8"))
        while len(symbols) > 1:
            ranked = [(rank[p], p) for p in zip(symbols, symbols[1:]) if p in rank]
            if not ranked:
                break
            symbols = _merge(symbols, min(ranked)[1])
        ids.extend(vocab[s] for s in symbols)
    return ids


def decode(ids, vocab):
    """Text of token ids as the ByteLevel decoder makes it, special tokens (ids past the
    vocabulary) skipped; bytes that are not UTF-8 become U+FFFD (maximal subparts)."""
    back = {i: s for s, i in vocab.items()}
    byte_of = {c: b for b, c in byte_alphabet().items()}
    data = bytes(byte_of[c] for i in ids if i in back for c in back[i])
    return data.decode("utf-8", errors="replace")


def tokenizer_json(vocab, merges, special_tokens, plain=()):
    """special_tokens: list of strings, given ids after the vocabulary in order. Those also in
    `plain` are added tokens that are not special (Whisper's timestamps: decoding keeps them)."""
    added = [{"id": len(vocab) + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": t not in plain} for i, t in enumerate(special_tokens)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
