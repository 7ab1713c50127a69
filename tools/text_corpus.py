"""Helpers shared by the tokenizer reference tools: the corpus split into test cases, and
GPT-2's byte-level alphabet."""
import json


def read_cases(path):
    """One case per line (terminator kept, so CRLF and blank lines count) plus the whole file,
    in the same order as tools/tiktoken_reference.js."""
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    return _split_on_newline(text) + [text]


def _split_on_newline(text):
    # str.splitlines also splits on \r, \x0b, \x1c, U+2028 ...; the cases split on "\n" only.
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def byte_alphabet():
    """Byte -> code point: printable Latin-1 bytes map to themselves, the rest to U+0100 on."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def write_json(path, value, compact=True):
    with open(path, "w", encoding="utf-8") as f:
        if compact:
            json.dump(value, f, ensure_ascii=False, separators=(",", ":"))
        else:
            json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")
