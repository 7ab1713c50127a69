"""Whisper's timestamp mode in plain torch, the reference `mminfer transcribe --timestamps` is
checked against (written apart from the C++ code in src/generate/timestamp_rules.cpp).

The rules, as the openai/whisper decoder applies them to each step's logits (the generated part of
the sequence is what follows the prompt):
  - <|notimestamps|> is never chosen;
  - timestamps come in pairs: after two timestamps (or one at the start) text must follow, after
    text and one timestamp only another timestamp or the end token (no text);
  - timestamps never decrease, and a segment has a nonzero length: the next timestamp is at least
    the last one right after a closing timestamp, else later than it;
  - the first generated token is a timestamp no later than max_initial_index;
  - when the timestamps' summed probability exceeds the likeliest text token's, a timestamp is forced.
Timestamp token i (timestamp_begin + i) stands for i * 0.02 s from the window's start.

Long audio is decoded one window after another, as openai/whisper's transcribe() does: each window
is the model's window length of audio from a seek position (zero-padded at the end); when a window's
tokens hold a segment boundary (two timestamps in a row) and do not end with a single timestamp
after text, its segments end at the last boundary and the next window starts at the first
timestamp of that pair (where the last complete segment ended);
else the next window starts right after this one. The advance is at least one timestamp step and
at most one window."""
import wave

import numpy as np
import torch

SECONDS_PER_TIMESTAMP = 0.02
TIMESTAMP_COUNT = 1501  # <|0.00|> .. <|30.00|>
MAX_INITIAL_INDEX = 50  # 1.0 s


def timestamp_token_names():
    return [f"<|{i * SECONDS_PER_TIMESTAMP:.2f}|>" for i in range(TIMESTAMP_COUNT)]


def apply_rules(logits, generated, eot, no_timestamps, timestamp_begin, max_initial_index=MAX_INITIAL_INDEX):
    """logits: 1-D float tensor (changed in place and returned); generated: the tokens after the prompt."""
    inf = float("inf")
    logits[no_timestamps] = -inf
    is_ts = [t >= timestamp_begin for t in generated]
    last_ts = len(generated) >= 1 and is_ts[-1]
    before_last_ts = len(generated) < 2 or is_ts[-2]
    if last_ts and before_last_ts:
        logits[timestamp_begin:] = -inf
    elif last_ts:
        logits[:eot] = -inf
    stamps = [t for t in generated if t >= timestamp_begin]
    if stamps:
        lowest = stamps[-1] if (last_ts and not before_last_ts) else stamps[-1] + 1
        logits[timestamp_begin:lowest] = -inf
    if not generated:
        logits[:timestamp_begin] = -inf
        logits[timestamp_begin + max_initial_index + 1:] = -inf
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    if torch.logsumexp(logprobs[timestamp_begin:], dim=-1) > logprobs[:timestamp_begin].max():
        logits[:timestamp_begin] = -inf
    return logits


def greedy(first, with_past, num_layers, hidden, prompt, rules, max_new_tokens):
    """One window's greedy tokens (batch 1): the prompt through decoder_model, then one token per
    step through decoder_with_past; stops after the end token (kept) or max_new_tokens."""
    eot = rules["eot"]
    generated = []
    with torch.no_grad():
        logits, *presents = first(torch.tensor([prompt], dtype=torch.int64), hidden)
        cross = [presents[4 * i + 2:4 * i + 4] for i in range(num_layers)]
        self_kv = [presents[4 * i:4 * i + 2] for i in range(num_layers)]
        while len(generated) < max_new_tokens:
            row = apply_rules(logits[0, -1].clone(), generated, **rules)
            token = int((row == row.max()).nonzero()[0])  # first of equals, as the C++ argmax
            generated.append(token)
            if token == eot:
                break
            past = [t for i in range(num_layers) for t in (*self_kv[i], *cross[i])]
            logits, *presents = with_past(torch.tensor([[token]], dtype=torch.int64), *past)
            self_kv = [presents[2 * i:2 * i + 2] for i in range(num_layers)]
    return generated


def segments(tokens, timestamp_begin, eot, window_start, window_close, decode):
    """The segments of one window's tokens: a timestamp opens a segment and the next one closes it;
    text with no open segment starts one at the last timestamp (or the window's start); a segment
    still open at the end closes at window_close (the window's end or the audio's), never before
    its start. Segments without tokens between their timestamps are dropped."""
    out = []
    start, held, last = None, [], window_start
    for t in tokens:
        if t == eot:
            break
        if t >= timestamp_begin:
            seconds = window_start + (t - timestamp_begin) * SECONDS_PER_TIMESTAMP
            if start is None:
                start, held = seconds, [t]
                continue
            held.append(t)
            if any(x < timestamp_begin for x in held):
                out.append(dict(start=start, end=seconds, tokens=held))
            start, held, last = None, [], seconds
            continue
        if start is None:
            start = last
        held.append(t)
    if start is not None and any(x < timestamp_begin for x in held):
        out.append(dict(start=start, end=max(start, window_close), tokens=held))
    for s in out:
        s["text"] = decode([x for x in s["tokens"] if x < timestamp_begin])
    return out


def window_cut(tokens, timestamp_begin, eot):
    """(kept, index): the tokens of one window that form its complete segments, and the timestamp
    index (token - timestamp_begin) where the last of them ends and the next window starts, or None
    to go on after the window.
    The end token and whatever follows it are left out."""
    body = list(tokens[:tokens.index(eot)]) if eot in tokens else list(tokens)
    stamp = [t >= timestamp_begin for t in body]
    single_ending = stamp[-2:] == [False, True]
    pairs = [i for i in range(1, len(body)) if stamp[i - 1] and stamp[i]]
    if pairs and not single_ending:  # through the pair's first timestamp, the last segment's end
        return body[:pairs[-1]], body[pairs[-1] - 1] - timestamp_begin
    return body, None


def seek_advance(index, window_samples, rate):
    """Samples from one window's start to the next's."""
    if index is None:
        return window_samples
    step = max(1, round(SECONDS_PER_TIMESTAMP * rate))
    return max(step, min(window_samples, round(index * SECONDS_PER_TIMESTAMP * rate)))


def transcribe_seeking(samples, window_samples, rate, decode_window, timestamp_begin, eot, decode):
    """Sequential long-form transcription. decode_window(padded window samples) gives the window's
    new tokens. Returns (windows: [{"seek": samples, "start": seconds, "tokens"}], segments, text)."""
    windows, segs, text, seek = [], [], "", 0
    while seek < len(samples):
        chunk = samples[seek:seek + window_samples]
        tokens = decode_window(np.pad(chunk, (0, window_samples - len(chunk))))
        kept, index = window_cut(tokens, timestamp_begin, eot)
        segs += segments(kept, timestamp_begin, eot, seek / rate, (seek + len(chunk)) / rate, decode)
        text += decode([t for t in kept if t < timestamp_begin])
        windows.append(dict(seek=seek, start=seek / rate, tokens=list(tokens)))
        seek += seek_advance(index, window_samples, rate)
    return windows, segs, text.lstrip(" ")


def format_time(seconds):
    """[hh:]mm:ss.mmm, as the CLI prints a segment's bounds."""
    ms = int(round(seconds * 1000))
    h, ms = divmod(ms, 3600000)
    m, ms = divmod(ms, 60000)
    s, ms = divmod(ms, 1000)
    return (f"{h:02d}:" if h else "") + f"{m:02d}:{s:02d}.{ms:03d}"


# --- clips ---------------------------------------------------------------------------------
def speech_like_clip(seconds, seed, rate=16000):
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    chirp = np.sin(2 * np.pi * (200 + 900 * t) * t)
    return (0.4 * chirp + 0.2 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)


def write_wav(path, samples, rate=16000):
    """16-bit PCM; returns the samples as a reader gets them back (int16 / 32768)."""
    pcm = np.clip(np.round(np.asarray(samples, np.float64) * 32767), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return pcm.astype(np.float64) / 32768.0

