#!/usr/bin/env python3
"""`mminfer serve` generating text: /v1/completions and /v1/chat/completions over the llama-tiny
test model with continuous batching. Answers equal `mminfer generate`'s for the same prompt,
settings and seed, alone and with many requests sharing the batch, streamed or not, through
OpenAI's routes and Triton's generate extension; the event
stream has OpenAI's shape and the official `openai` npm client reads it; a full queue answers
429; clients that leave mid-stream free their sequences; bad requests get OpenAI's error
envelope while other streams go on.

    generate_e2e.py --mminfer BIN --models DIR --work DIR"""
import argparse
import base64
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_harness import Server, in_threads, metric, run_tests  # noqa: E402

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


class Context:
    pass


def make_repository(models, work):
    """llama (with a chat template, 4 sequences at once) and llama-one (1 sequence, 2 waiting,
    no template), both copies of llama-tiny; whisper and vlm, copies of whisper-tiny-test and
    vlm-tiny; vlm-pruned, vlm-tiny dropping half its image tokens."""
    repo = os.path.join(work, "repository")
    shutil.rmtree(repo, ignore_errors=True)
    source = os.path.join(models, "llama-tiny")
    # llama-tiny's cache: 2 layers x 2 KV heads x (16 + 16) floats = 512 bytes a position, 128 KiB
    # for a sequence of 256: llama-budget's bytes fit 2 sequences, llama-starved's none.
    for name, config in (("llama", {"max_sequences": 4, "prefill_chunk": 16}),
                         ("llama-one", {"max_sequences": 1, "queue_capacity": 2}),
                         ("llama-budget", {"max_sequences": 8, "kv_cache_bytes": 300000}),
                         ("llama-starved", {"kv_cache_bytes": 1000})):
        folder = os.path.join(repo, name, "1")
        shutil.copytree(source, folder, ignore=shutil.ignore_patterns("reference"))
        with open(os.path.join(repo, name, "config.json"), "w") as f:
            json.dump(config, f)
    with open(os.path.join(repo, "llama", "1", "chat_template.jinja"), "w") as f:
        f.write(CHATML)
    for name, source in (("whisper", "whisper-tiny-test"), ("vlm", "vlm-tiny"), ("vlm-pruned", "vlm-tiny")):
        shutil.copytree(os.path.join(models, source), os.path.join(repo, name, "1"), ignore=shutil.ignore_patterns("reference"))
    with open(os.path.join(repo, "vlm-pruned", "config.json"), "w") as f:
        json.dump({"prune_image_tokens": 0.5}, f)
    return repo


def cli(ctx, prompt_ids, max_tokens, temperature=None, top_p=None, seed=None):
    """`mminfer generate`'s text and tokens for one prompt (cached per settings)."""
    key = (tuple(prompt_ids), max_tokens, temperature, top_p, seed)
    if key not in ctx.cli_cache:
        args = [ctx.mminfer, "generate", "--pipeline", ctx.folder, "--json", "--max-new-tokens", str(max_tokens),
                "--prompt-ids", ",".join(map(str, prompt_ids))]
        if temperature is not None:
            args += ["--temperature", str(temperature)]
        if top_p is not None:
            args += ["--top-p", str(top_p)]
        if seed is not None:
            args += ["--seed", str(seed)]
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"mminfer generate failed: {p.stderr.strip()}"
        r = json.loads(p.stdout)["results"][0]
        ctx.cli_cache[key] = (r["text"], len(r["tokens"]))
    return ctx.cli_cache[key]


def body_for(case, model="llama", **extra):
    b = {"model": model, "prompt": case["ids"], "max_tokens": case["max_tokens"]}
    for k in ("temperature", "top_p", "seed"):
        if case.get(k) is not None:
            b[k] = case[k]
    b.update(extra)
    return b


def read_events(resp):
    """The data lines of a server-sent event stream, parsed (the final [DONE] as the string)."""
    events = []
    for raw in resp.read().decode().split("\n\n"):
        if not raw.strip():
            continue
        assert raw.startswith("data: "), f"an event that is not a data line: {raw[:80]!r}"
        data = raw[len("data: "):]
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


def stream(ctx, path, body):
    """POSTs with stream true; returns (status, content type, events)."""
    conn = ctx.server.connection(timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return r.status, r.getheader("Content-Type"), json.loads(r.read())
        return r.status, r.getheader("Content-Type"), read_events(r)
    finally:
        conn.close()


def streamed_text(events, choices=1):
    texts = [""] * choices
    reasons = [None] * choices
    for e in events:
        if e == "[DONE]" or not e["choices"]:
            continue
        c = e["choices"][0]
        piece = c["delta"].get("content", "") if "delta" in c else c["text"]
        texts[c["index"]] += piece or ""
        if c["finish_reason"]:
            reasons[c["index"]] = c["finish_reason"]
    return texts, reasons


def cases(ctx):
    """Prompts from the reference (ids), greedy and sampled with seeds."""
    out = []
    for i, ids in enumerate(ctx.prompts):
        out.append({"ids": ids, "max_tokens": 20 + 7 * i})
        out.append({"ids": ids, "max_tokens": 24, "temperature": 1.3, "top_p": 0.9, "seed": 7 + i})
    return out


def check_against_cli(ctx, case, text, completion_tokens, what):
    want_text, want_tokens = cli(ctx, case["ids"], case["max_tokens"], case.get("temperature"), case.get("top_p"),
                                 case.get("seed"))
    assert text == want_text, f"{what}: text {text!r} is not mminfer generate's {want_text!r}"
    if completion_tokens is not None:
        assert completion_tokens == want_tokens, f"{what}: {completion_tokens} completion tokens, the CLI made {want_tokens}"


def test_models_lists_generators(ctx):
    ids = {m["id"] for m in ctx.server.get("/v1/models").json()["data"]}
    assert {"llama", "llama-one"} <= ids, f"/v1/models lists {ids}"


def test_completions_equal_cli_one_at_a_time(ctx):
    for case in cases(ctx):
        r = ctx.server.post_json("/v1/completions", body_for(case))
        assert r.status == 200, f"{r.status}: {r.body[:200]!r}"
        j = r.json()
        assert j["object"] == "text_completion" and j["id"].startswith("cmpl-"), j
        assert j["choices"][0]["finish_reason"] in ("stop", "length")
        assert j["usage"]["prompt_tokens"] == len(case["ids"]), j["usage"]
        check_against_cli(ctx, case, j["choices"][0]["text"], j["usage"]["completion_tokens"], f"case {case}")
    # A text prompt is tokenized as the command line tokenizes it.
    r = ctx.server.post_json("/v1/completions", {"model": "llama", "prompt": "hello world", "max_tokens": 12, "temperature": 0})
    p = subprocess.run([ctx.mminfer, "generate", "--pipeline", ctx.folder, "--json", "--max-new-tokens", "12", "hello world"],
                       capture_output=True, text=True, timeout=120)
    assert r.json()["choices"][0]["text"] == json.loads(p.stdout)["results"][0]["text"]


def test_concurrent_requests_equal_cli(ctx):
    """24 requests at once, streamed and not, on 4 sequence rows: each answer is the CLI's."""
    all_cases = cases(ctx)
    rng = random.Random(3)
    picks = [rng.choice(all_cases) for _ in range(24)]

    def one(i):
        case = picks[i]
        if i % 2:
            status, ctype, events = stream(ctx, "/v1/completions", body_for(case))
            assert status == 200, f"{status}: {events}"
            texts, _ = streamed_text(events)
            return case, texts[0], None
        r = ctx.server.post_json("/v1/completions", body_for(case), timeout=120)
        assert r.status == 200, f"{r.status}: {r.body[:200]!r}"
        return case, r.json()["choices"][0]["text"], r.json()["usage"]["completion_tokens"]

    for i, result in enumerate(in_threads(len(picks), one)):
        if isinstance(result, Exception):
            raise AssertionError(f"request {i}: {result}")
        case, text, tokens = result
        check_against_cli(ctx, case, text, tokens, f"concurrent request {i} ({'stream' if i % 2 else 'whole'})")


def test_stream_has_openais_shape(ctx):
    case = {"ids": ctx.prompts[0], "max_tokens": 16}
    status, ctype, events = stream(ctx, "/v1/completions", body_for(case, stream_options={"include_usage": True}))
    assert status == 200 and ctype.startswith("text/event-stream"), (status, ctype)
    assert events[-1] == "[DONE]", f"the stream ends with {events[-1]!r}"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == cli(ctx, case["ids"], 16)[1], usage
    assert all(e["object"] == "text_completion" and e["id"] == events[0]["id"] for e in events[:-1])
    texts, reasons = streamed_text(events)
    check_against_cli(ctx, case, texts[0], None, "streamed completion")
    assert reasons == ["length"], reasons

    chat = {"model": "llama", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}],
            "max_tokens": 20, "temperature": 0}
    whole = ctx.server.post_json("/v1/chat/completions", chat)
    assert whole.status == 200, whole.body[:200]
    j = whole.json()
    assert j["object"] == "chat.completion" and j["choices"][0]["message"]["role"] == "assistant", j
    status, ctype, events = stream(ctx, "/v1/chat/completions", chat)
    assert status == 200 and events[-1] == "[DONE]"
    assert events[0]["object"] == "chat.completion.chunk" and events[0]["choices"][0]["delta"]["role"] == "assistant"
    texts, reasons = streamed_text(events)
    assert texts[0] == j["choices"][0]["message"]["content"], "the streamed chat differs from the whole answer"
    assert reasons[0] == j["choices"][0]["finish_reason"]
    # Text parts of a content list read as the same text.
    parts = dict(chat, messages=[chat["messages"][0], {"role": "user", "content": [{"type": "text", "text": "hi "},
                                                                                  {"type": "text", "text": "there"}]}])
    assert ctx.server.post_json("/v1/chat/completions", parts).json()["choices"][0]["message"] == j["choices"][0]["message"]


def test_n_choices_draw_from_consecutive_seeds(ctx):
    case = {"ids": ctx.prompts[1], "max_tokens": 18, "temperature": 1.1, "seed": 40}
    r = ctx.server.post_json("/v1/completions", body_for(case, n=3))
    assert r.status == 200, r.body[:200]
    choices = r.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    for j, c in enumerate(choices):
        check_against_cli(ctx, dict(case, seed=40 + j), c["text"], None, f"choice {j}")
    status, _, events = stream(ctx, "/v1/completions", body_for(case, n=3))
    texts, _ = streamed_text(events, 3)
    assert texts == [c["text"] for c in choices], "streamed choices differ from the whole answer's"


BAD = [
    ("/v1/completions", b"{not json", 400, None),
    ("/v1/completions", {"prompt": "x"}, 400, "model"),
    ("/v1/completions", {"model": "nope", "prompt": "x"}, 404, "model"),
    ("/v1/completions", {"model": "llama"}, 400, "prompt"),
    ("/v1/completions", {"model": "llama", "prompt": ""}, 400, "prompt"),
    ("/v1/completions", {"model": "llama", "prompt": [1, "a"]}, 400, "prompt"),
    ("/v1/completions", {"model": "llama", "prompt": [[1, 2], [100000]]}, 400, "prompt"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "skip_special_tokens": "no"}, 400, "skip_special_tokens"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "max_tokens": -5}, 400, "max_tokens"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "max_tokens": "ten"}, 400, "max_tokens"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "max_tokens": 10 ** 12}, 400, "max_tokens"),
    ("/v1/completions", {"model": "llama", "prompt": [5] * 300}, 400, "prompt"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "temperature": 5}, 400, "temperature"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "top_p": 0}, 400, "top_p"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "n": 0}, 400, "n"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "logprobs": 3}, 400, "logprobs"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ("/v1/chat/completions", {"model": "llama", "messages": "hi"}, 400, "messages"),
    ("/v1/chat/completions", {"model": "llama", "messages": []}, 400, "messages"),
    ("/v1/chat/completions", {"model": "llama", "messages": [{"role": "wizard", "content": "x"}]}, 400, "messages"),
    ("/v1/chat/completions", {"model": "llama", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}, 400, "messages"),
    ("/v1/chat/completions", {"model": "llama", "messages": [{"role": "user", "content": [{"type": "video"}]}]}, 400, "messages"),
    ("/v1/chat/completions", {"model": "llama-one", "messages": [{"role": "user", "content": "x"}]}, 400, "messages"),
]


def test_bad_requests_get_the_envelope_while_a_stream_goes_on(ctx):
    case = {"ids": ctx.prompts[0], "max_tokens": 200, "temperature": 0.9, "seed": 3}
    done = {}

    def long_stream():
        done["result"] = stream(ctx, "/v1/completions", body_for(case))

    t = threading.Thread(target=long_stream)
    t.start()
    for path, body, status, param in BAD:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        r = ctx.server.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        e = r.openai_error()
        assert r.status == status, f"{path} {body!r:.120}: expected {status}, got {r.status} {e['message']}"
        if param:
            assert e["param"] == param, f"{body!r:.120}: param {e['param']!r}, expected {param!r} ({e['message']})"
        assert e["message"], "an error without a message"
    r = ctx.server.get("/v1/completions")
    assert r.status == 405 and r.openai_error()
    long_prompt = ctx.server.post_json("/v1/completions", {"model": "llama", "prompt": [5] * 300}).openai_error()
    assert "256" in long_prompt["message"] and long_prompt["code"] == "context_length_exceeded", long_prompt
    t.join(120)
    status, _, events = done["result"]
    assert status == 200
    check_against_cli(ctx, case, streamed_text(events)[0][0], None, "the stream beside the bad requests")


def test_full_queue_answers_429(ctx):
    """llama-one runs 1 sequence and lets 2 wait: a stream of 2 long choices holds the row and
    one waiting place, so 2 more choices cannot all wait."""
    ids = ctx.prompts[0]
    conn = ctx.server.connection(timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps({"model": "llama-one", "prompt": ids, "n": 2, "max_tokens": 250 - len(ids),
                                                             "temperature": 0.8, "seed": 1, "stream": True}),
                 headers={"Content-Type": "application/json"})
    first = conn.getresponse()
    assert first.status == 200
    busy = ctx.server.post_json("/v1/completions", {"model": "llama-one", "prompt": ids, "n": 2, "max_tokens": 4})
    e = busy.openai_error()
    assert busy.status == 429 and busy.headers.get("retry-after"), f"expected 429 with Retry-After, got {busy.status} {e}"
    assert e["type"] == "rate_limit_error", e
    events = read_events(first)
    conn.close()
    assert events[-1] == "[DONE]" and streamed_text(events, 2)[1] == ["length", "length"]
    # Under a burst, only 200 and 429.
    codes = in_threads(12, lambda i: ctx.server.post_json("/v1/completions", {"model": "llama-one", "prompt": ids, "max_tokens": 40},
                                                          timeout=120).status)
    assert set(codes) <= {200, 429} and 200 in codes, codes


def running(ctx, model="llama"):
    m = ctx.server.metrics()
    return metric(m, "mminfer_generation_running_sequences", model=model) + \
        metric(m, "mminfer_generation_waiting_sequences", model=model)


def test_clients_that_leave_free_their_sequences(ctx):
    before = metric(ctx.server.metrics(), "mminfer_generation_sequences_total", model="llama", finish="cancelled")
    ids = ctx.prompts[0]

    def leave(i):
        s = socket.create_connection((ctx.server.host, ctx.server.port), timeout=60)
        body = json.dumps({"model": "llama", "prompt": ids, "n": 4, "max_tokens": 250 - len(ids), "temperature": 1.0,
                           "seed": i, "stream": True}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while b"data: " not in got:  # the stream has begun
            chunk = s.recv(4096)
            assert chunk, "the server closed before the stream began"
            got += chunk
        s.close()
        return True

    results = in_threads(25, leave)
    assert all(r is True for r in results), [r for r in results if r is not True][:3]
    deadline = time.monotonic() + 30
    while running(ctx) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(ctx) == 0, "sequences still hold KV cache blocks after their clients left"
    m = ctx.server.metrics()
    cancelled = metric(m, "mminfer_generation_sequences_total", model="llama", finish="cancelled") - before
    assert cancelled >= 50, f"only {cancelled:.0f} of 100 sequences were cancelled when their clients left"
    assert metric(m, "mminfer_kv_cache_blocks", model="llama", state="used") == 0, "blocks stayed allocated after their clients left"
    r = ctx.server.post_json("/v1/completions", body_for({"ids": ids, "max_tokens": 10}))
    check_against_cli(ctx, {"ids": ids, "max_tokens": 10}, r.json()["choices"][0]["text"], None, "after the departures")


def test_256_clients_get_answers_or_429(ctx):
    """256 clients at once on 4 rows and a queue of 256: every answer is 200 or 429, streams
    included, and memory stays put (the cache was allocated at load)."""
    ids = ctx.prompts[2]
    rss = ctx.server.memory_kib()

    def one(i):
        body = {"model": "llama", "prompt": ids[: 8 + i % 16], "max_tokens": 8, "temperature": 0.5, "seed": i}
        if i % 3 == 0:
            status, _, events = stream(ctx, "/v1/completions", body)
            assert status != 200 or events[-1] == "[DONE]", "a stream did not end with [DONE]"
            return status
        return ctx.server.post_json("/v1/completions", body, timeout=120).status

    codes = in_threads(256, one)
    bad = [c for c in codes if not isinstance(c, int) or c not in (200, 429, 503)]
    assert not bad, f"answers other than 200/429/503: {bad[:5]}"
    assert codes.count(200) >= 64, f"only {codes.count(200)} of 256 answered"
    grown = (ctx.server.memory_kib() - rss) / 1024
    print(f"  256 clients: {codes.count(200)} answered, {codes.count(429)} got 429; RSS grew {grown:.1f} MiB", flush=True)
    assert grown < 64, f"RSS grew {grown:.0f} MiB under 256 clients"
    assert running(ctx) == 0


def test_kv_cache_bytes_bounds_the_blocks(ctx):
    """kv_cache_bytes sets the pool: 300000 bytes are 36 blocks of 16 positions at 512 bytes each.
    Six long answers at once need more, so the newest give their blocks back and resume later:
    /metrics counts the preemptions, and every answer is still the command line's."""
    m = ctx.server.metrics()
    blocks = sum(metric(m, "mminfer_kv_cache_blocks", model="llama-budget", state=s) for s in ("used", "cached", "free"))
    assert blocks == 36, f"kv_cache_bytes made {blocks} blocks"
    assert metric(m, "mminfer_kv_cache_block_positions", model="llama-budget") == 16
    assert metric(m, "mminfer_kv_cache_bytes", model="llama-budget") == 36 * 16 * 512
    case = {"ids": ctx.prompts[0], "max_tokens": 200}

    def one(i):
        return ctx.server.post_json("/v1/completions", body_for(case, model="llama-budget"), timeout=300)

    answers = in_threads(6, one)
    for r in answers:
        assert not isinstance(r, Exception) and r.status == 200, r
        check_against_cli(ctx, case, r.json()["choices"][0]["text"], r.json()["usage"]["completion_tokens"], "preempted")
    m = ctx.server.metrics()
    preempted = metric(m, "mminfer_generation_preemptions_total", model="llama-budget")
    print(f"  6 answers of 200 tokens on 36 blocks: {preempted:.0f} preemptions", flush=True)
    assert preempted > 0, "six long answers fit 36 blocks without preemption"
    assert metric(m, "mminfer_kv_cache_blocks", model="llama-budget", state="used") == 0
    index = {e["name"]: e for e in ctx.server.post_json("/v2/repository/index", {}).json()}
    starved = index["llama-starved"]
    assert starved["state"] == "UNAVAILABLE" and "kv_cache_bytes 1000 holds no sequence of 256 positions" in starved["reason"], starved
    r = ctx.server.post_json("/v1/completions", body_for({"ids": ctx.prompts[0], "max_tokens": 12}, model="llama-budget"))
    check_against_cli(ctx, {"ids": ctx.prompts[0], "max_tokens": 12}, r.json()["choices"][0]["text"], None, "llama-budget")


def image_chat(url, question, **extra):
    return dict({"model": "vlm", "max_tokens": 20, "temperature": 0,
                 "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                           {"type": "text", "text": question}]}]}, **extra)


def test_vision_language_chat(ctx):
    """Chats about an image on the SmolVLM-shaped vlm-tiny: `mminfer chat`'s answer for every
    image and question, whole and streamed; a second question about an image starts from the
    first one's keys and values through the image, another image does not; bad images."""
    from PIL import Image, ImageDraw
    files = []
    for i, (size, colour) in enumerate((((200, 150), (30, 120, 200)), ((160, 160), (200, 40, 40)))):
        img = Image.new("RGB", size, colour)
        ImageDraw.Draw(img).ellipse((20 + 10 * i, 30, 120, 110), fill=(250, 200, 0))
        files.append(os.path.join(ctx.work, f"image{i}.png"))
        img.save(files[-1])
    urls = ["data:image/png;base64," + base64.b64encode(open(f, "rb").read()).decode() for f in files]
    folder = os.path.join(os.path.dirname(os.path.dirname(ctx.folder)), "vlm", "1")
    m = ctx.server.metrics()
    encoded_before = metric(m, "mminfer_encoder_inputs_total", model="vlm", source="encoder")
    reused_before = metric(m, "mminfer_encoder_inputs_total", model="vlm", source="cache")
    cached = {}
    for question in ("What is in the image?", "Which colour is the ball?"):
        for f, url in zip(files, urls):
            p = subprocess.run([ctx.mminfer, "chat", "--pipeline", folder, "--image", f, question, "--max-new-tokens", "20",
                                "--json"], capture_output=True, text=True, timeout=120)
            want = json.loads(p.stdout)["text"]
            r = ctx.server.post_json("/v1/chat/completions", image_chat(url, question))
            assert r.status == 200, r.body[:300]
            j = r.json()
            assert j["choices"][0]["message"]["content"] == want, f"{f} {question!r}: {j['choices'][0]['message']} vs {want!r}"
            cached[(f, question)] = j["usage"]["prompt_tokens_details"]["cached_tokens"]
            status, _, events = stream(ctx, "/v1/chat/completions", image_chat(url, question))
            assert status == 200 and streamed_text(events)[0][0] == want, "the streamed answer differs"
    # The image block (image_seq_len tokens) sits early in the prompt: a second question about the
    # same image reuses it; the first question about the second image reuses only what precedes it.
    image_tokens = json.load(open(os.path.join(folder, "config.json")))["image_seq_len"]
    assert cached[(files[0], "Which colour is the ball?")] >= image_tokens, cached
    assert cached[(files[1], "What is in the image?")] < image_tokens, cached
    m = ctx.server.metrics()
    encoded = metric(m, "mminfer_encoder_inputs_total", model="vlm", source="encoder") - encoded_before
    reused = metric(m, "mminfer_encoder_inputs_total", model="vlm", source="cache") - reused_before
    assert (encoded, reused) == (len(files), 3 * len(files)), f"{encoded:.0f} images encoded, {reused:.0f} from the cache"
    for url, status in ((urls[0][:40] + "@@@", 400), ("https://example.com/a.png", 400),
                        ("data:image/png;base64," + base64.b64encode(b"not an image").decode(), 400)):
        r = ctx.server.post_json("/v1/chat/completions", image_chat(url, "what?"))
        assert r.status == status and r.openai_error()["param"] == "messages", f"{url[:50]}: {r.status} {r.body[:200]!r}"
    two = image_chat(urls[0], "both?")
    two["messages"][0]["content"].append({"type": "image_url", "image_url": {"url": urls[1]}})
    r = ctx.server.post_json("/v1/chat/completions", two)
    assert r.status == 400 and "takes one" in r.openai_error()["message"], r.body[:200]
    # Chats at once about new images: each image goes through the model's image queue (batched
    # with the others when they meet there); every answer arrives.
    m = ctx.server.metrics()
    before = metric(m, "mminfer_batch_size_sum", model="vlm", queue="image")
    batches = metric(m, "mminfer_batch_size_count", model="vlm", queue="image")
    fresh = []
    for i in range(6):
        img = Image.new("RGB", (80 + 10 * i, 90), (40 * i, 200 - 30 * i, 90))
        path = os.path.join(ctx.work, f"fresh{i}.png")
        img.save(path)
        fresh.append("data:image/png;base64," + base64.b64encode(open(path, "rb").read()).decode())
    answers = in_threads(6, lambda i: ctx.server.post_json("/v1/chat/completions", image_chat(fresh[i], "What is it?"), timeout=120))
    assert all(not isinstance(r, Exception) and r.status == 200 for r in answers), answers
    m = ctx.server.metrics()
    after = metric(m, "mminfer_batch_size_sum", model="vlm", queue="image")
    assert after - before == 6, f"the image queue took {after - before:.0f} of 6 chats"
    print(f"  6 image chats at once: {metric(m, 'mminfer_batch_size_count', model='vlm', queue='image') - batches:.0f} encoder batches",
          flush=True)


def test_vision_language_chat_with_fewer_image_tokens(ctx):
    """vlm-pruned (config prune_image_tokens 0.5): `mminfer chat --prune-image-tokens 0.5`'s answer
    and prompt length for two questions about one image, asked twice each; the rows each question
    keeps differ, so a later question reuses no image rows another one kept."""
    from PIL import Image, ImageDraw
    img = Image.new("RGB", (180, 140), (40, 160, 90))
    ImageDraw.Draw(img).rectangle((30, 20, 120, 100), fill=(240, 240, 30))
    f = os.path.join(ctx.work, "pruned.png")
    img.save(f)
    url = "data:image/png;base64," + base64.b64encode(open(f, "rb").read()).decode()
    folder = os.path.join(os.path.dirname(os.path.dirname(ctx.folder)), "vlm-pruned", "1")
    for question in ("What is in the image?", "Which colour is the box?", "What is in the image?"):
        p = subprocess.run([ctx.mminfer, "chat", "--pipeline", folder, "--image", f, question, "--max-new-tokens", "20",
                            "--json", "--prune-image-tokens", "0.5"], capture_output=True, text=True, timeout=120)
        want = json.loads(p.stdout)
        r = ctx.server.post_json("/v1/chat/completions", dict(image_chat(url, question), model="vlm-pruned"))
        assert r.status == 200, r.body[:300]
        j = r.json()
        assert j["choices"][0]["message"]["content"] == want["text"], f"{question!r}: {j['choices'][0]['message']} vs {want['text']!r}"
        assert j["usage"]["prompt_tokens"] == want["prompt_tokens"], (j["usage"], want["prompt_tokens"])
        assert want["image_tokens"][0] * 2 == want["image_tokens"][1], want["image_tokens"]


def test_later_turns_reuse_the_prefix(ctx):
    """A conversation's second turn starts from the first turn's cached blocks (usage's
    cached_tokens, /metrics' prefix hits) and still answers what the command line answers."""
    before = metric(ctx.server.metrics(), "mminfer_generation_prefix_hits_total", model="llama")
    first = {"ids": ctx.prompts[3], "max_tokens": 30}
    r = ctx.server.post_json("/v1/completions", body_for(first, temperature=0))
    text, made = r.json()["choices"][0]["text"], r.json()["usage"]["completion_tokens"]
    check_against_cli(ctx, first, text, made, "the first turn")
    # The second turn: the first prompt, a part of its answer as ids (the CLI's tokens), more.
    p = subprocess.run([ctx.mminfer, "generate", "--pipeline", ctx.folder, "--json", "--max-new-tokens", "30",
                        "--prompt-ids", ",".join(map(str, first["ids"]))], capture_output=True, text=True, timeout=120)
    answer = json.loads(p.stdout)["results"][0]["tokens"]
    second = {"ids": first["ids"] + answer[:12] + ctx.prompts[0][:6], "max_tokens": 20}
    r = ctx.server.post_json("/v1/completions", body_for(second, temperature=0))
    usage = r.json()["usage"]
    shared = len(first["ids"]) + 12  # reused in whole blocks of 16 positions
    assert usage["prompt_tokens_details"]["cached_tokens"] == shared // 16 * 16 > 0, usage
    check_against_cli(ctx, second, r.json()["choices"][0]["text"], usage["completion_tokens"], "the second turn")
    after = metric(ctx.server.metrics(), "mminfer_generation_prefix_hits_total", model="llama")
    assert after > before, "/metrics counted no prefix hit"


def test_special_tokens_show_when_asked(ctx):
    """skip_special_tokens false (vLLM's parameter) writes special tokens' text into the answer:
    hot sampling (seeded, so the same tokens each time) with ignore_eos draws some among 200
    tokens. Without them the text is the default answer's."""
    specials = [t["content"] for t in json.load(open(os.path.join(ctx.folder, "tokenizer.json")))["added_tokens"] if t["special"]]
    shown_any = 0
    for seed in range(1, 5):
        body = {"model": "llama", "prompt": ctx.prompts[0], "max_tokens": 200, "temperature": 2.0, "seed": seed,
                "ignore_eos": True}
        plain = ctx.server.post_json("/v1/completions", body).json()["choices"][0]["text"]
        shown = ctx.server.post_json("/v1/completions", dict(body, skip_special_tokens=False)).json()["choices"][0]["text"]
        stripped = shown
        for t in specials:
            stripped = stripped.replace(t, "")
        assert stripped == plain, f"{shown!r} without its special tokens is not {plain!r}"
        shown_any += shown != plain
    assert shown_any, "no answer showed a special token"


def test_chat_with_input_audio(ctx):
    """A chat's input_audio part goes to the speech-to-text model: its answer is the transcript
    /v1/audio/transcriptions gives, whole or streamed. Other models, missing or extra parts,
    data that is not base64 or not audio, and settings a transcript cannot follow get a 400."""
    data = open(ctx.wavs[1], "rb").read()
    want = cli_transcript(ctx, ctx.wavs[1], False)["text"].strip()
    assert want, "the clip has no words to compare"

    def audio_part(raw=data):
        return {"type": "input_audio", "input_audio": {"data": base64.b64encode(raw).decode(), "format": "wav"}}

    messages = [{"role": "user", "content": [{"type": "text", "text": "What is said here?"}, audio_part()]}]
    r = ctx.server.post_json("/v1/chat/completions", {"model": "whisper", "messages": messages})
    assert r.status == 200, f"{r.status}: {r.body[:200]!r}"
    j = r.json()
    assert j["object"] == "chat.completion" and j["id"].startswith("chatcmpl-"), j
    assert j["choices"][0]["message"] == {"role": "assistant", "content": want, "refusal": None}, j["choices"][0]
    assert j["choices"][0]["finish_reason"] == "stop" and j["usage"]["completion_tokens"] > 0, j
    status, ctype, events = stream(ctx, "/v1/chat/completions", {"model": "whisper", "messages": messages})
    assert status == 200 and ctype.startswith("text/event-stream") and events[-1] == "[DONE]", (status, events[-1:])
    texts, reasons = streamed_text(events)
    assert texts == [want] and reasons == ["stop"], (texts, reasons)
    for model, msgs, extra, param, says in (
            ("llama", messages, {}, "messages", "reads no audio"),
            ("whisper", [{"role": "user", "content": "hello"}], {}, "messages", "need an input_audio part"),
            ("whisper", [{"role": "user", "content": [audio_part(), audio_part()]}], {}, "messages", "2 audio parts"),
            ("whisper", [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "@@@"}}]}], {},
             "messages", "not base64"),
            ("whisper", [{"role": "user", "content": [audio_part(b"plain text, no audio")]}], {}, "messages", "not audio"),
            ("whisper", messages, {"temperature": 0.7}, "temperature", "must be 0"),
            ("whisper", messages, {"n": 2}, "n", "must be 1")):
        r = ctx.server.post_json("/v1/chat/completions", dict({"model": model, "messages": msgs}, **extra))
        e = r.openai_error()
        assert r.status == 400 and e["param"] == param and says in e["message"], f"{model} {extra}: {r.status} {e}"


def test_loadgen_generate(ctx):
    """mminfer loadgen --generate: every streamed answer counted with its tokens and timings, as
    completions of token ids, and as chats about images on the vision-language model."""
    from PIL import Image
    url = f"http://{ctx.server.host}:{ctx.server.port}"

    def loadgen(*extra):
        p = subprocess.run([ctx.mminfer, "loadgen", "--url", url, "--generate", "--json", *extra],
                           capture_output=True, text=True, timeout=240)
        assert p.returncode == 0, f"loadgen {extra}: exit {p.returncode}: {p.stderr.strip()}"
        return json.loads(p.stdout)

    r = loadgen("--model", "llama", "--concurrency", "4", "--requests", "8", "--prompt-tokens", "16-32",
                "--output-tokens", "8", "--max-token-id", "600")
    assert r["ok"] == 8 and r["status"] == {"200": 8} and r["output_tokens"] == 64, r
    assert 8 * 16 <= r["prompt_tokens"] <= 8 * 32 and r["ttft_ms"]["p50"] > 0 and r["tpot_ms"]["p50"] > 0, r
    files = []
    for i, colour in enumerate(((20, 200, 90), (200, 20, 90))):
        files.append(os.path.join(ctx.work, f"loadgen{i}.png"))
        Image.new("RGB", (96, 64), colour).save(files[-1])
    r = loadgen("--model", "vlm", "--concurrency", "2", "--requests", "4", "--prompt-tokens", "6", "--output-tokens", "5",
                "--image", files[0], "--image", files[1])
    # Each prompt holds the template, the image's tokens and the six words, as the usage chunk counts them.
    assert r["ok"] == 4 and r["output_tokens"] == 20 and r["prompt_tokens"] > 4 * 20, r
    p = subprocess.run([ctx.mminfer, "loadgen", "--url", url, "--generate", "--model", "vlm", "--requests", "1",
                        "--images-per-request", "1"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "--images-per-request needs --image or --image-dir" in p.stderr, p.stderr


def test_metrics_count_generation(ctx):
    m = ctx.server.metrics()
    for name in ("mminfer_generation_time_to_first_token_seconds_count", "mminfer_generation_time_per_output_token_seconds_count",
                 "mminfer_generation_e2e_seconds_count", "mminfer_generation_output_tokens_total",
                 "mminfer_generation_prompt_tokens_total"):
        assert metric(m, name, model="llama") > 0, f"{name} did not move"
    assert metric(m, "mminfer_kv_cache_bytes", model="llama") > 0
    assert metric(m, "mminfer_generation_sequences_total", model="llama", finish="length") > 0


def test_triton_generate_extension(ctx):
    """Triton's generate and generate_stream: settings as inputs or under parameters, the CLI's
    text, KServe's {"error": text} for bad requests."""
    case = {"ids": ctx.prompts[2], "max_tokens": 21, "temperature": 1.2, "seed": 5}
    text = ctx.server.post_json("/v1/completions", body_for(case)).json()["choices"][0]["text"]
    check_against_cli(ctx, case, text, None, "the completion beside Triton's")
    # Triton takes text: the same prompt as text through both routes.
    plain = {"model": "llama", "prompt": "a b c", "max_tokens": 21, "temperature": 1.2, "seed": 5}
    want = ctx.server.post_json("/v1/completions", plain).json()["choices"][0]["text"]
    r = ctx.server.post_json("/v2/models/llama/generate", {"text_input": "a b c", "max_tokens": 21,
                                                           "parameters": {"temperature": 1.2, "seed": 5}})
    assert r.status == 200, r.body[:200]
    j = r.json()
    assert j["model_name"] == "llama" and j["model_version"] == "1" and j["text_output"] == want, j
    assert j["completion_tokens"] == 21 and j["finish_reason"] == "length", j
    conn = ctx.server.connection(timeout=120)
    conn.request("POST", "/v2/models/llama/versions/1/generate_stream",
                 body=json.dumps({"text_input": "a b c", "parameters": {"max_tokens": 21, "temperature": 1.2, "seed": 5}}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    events = read_events(resp)
    conn.close()
    assert all(set(e) == {"model_name", "model_version", "text_output"} for e in events), events[:2]
    assert "".join(e["text_output"] for e in events) == want, "generate_stream's pieces differ from generate's text"
    for path, body, status in (("/v2/models/llama/generate", {"parameters": {"max_tokens": 3}}, 400),
                               ("/v2/models/llama/generate", {"text_input": "x", "parameters": {"max_tokens": 0}}, 400),
                               ("/v2/models/llama/generate", {"text_input": "x", "parameters": 3}, 400),
                               ("/v2/models/llama/generate", {"text_input": "x", "n": 2}, 400),
                               ("/v2/models/llama/versions/9/generate", {"text_input": "x"}, 404),
                               ("/v2/models/nope/generate_stream", {"text_input": "x"}, 404)):
        r = ctx.server.post_json(path, body)
        assert r.status == status, f"{path} {body}: expected {status}, got {r.status} {r.body[:200]!r}"
        e = r.json()["error"]
        assert isinstance(e, str) and e, f"{path} {body}: KServe's error is text, got {e!r}"


def multipart(fields, files):
    """A multipart/form-data body: fields {name: text}, files {name: (filename, bytes)}."""
    boundary = "mminfer-test-7f3a"
    out = b""
    for k, v in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    for k, (filename, data) in files.items():
        out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"; filename="{filename}"\r\n'
                f'Content-Type: application/octet-stream\r\n\r\n').encode() + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def transcribe(ctx, fields, files):
    body, ctype = multipart(fields, files)
    return ctx.server.request("POST", "/v1/audio/transcriptions", body=body, headers={"Content-Type": ctype}, timeout=120)


def cli_transcript(ctx, wav, timestamps):
    args = [ctx.mminfer, "transcribe", "--pipeline", ctx.whisper, "--json", wav] + (["--timestamps"] if timestamps else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["results"][0]


def test_audio_transcriptions(ctx):
    """/v1/audio/transcriptions: the text and segments of `mminfer transcribe`, in every
    response_format; bad forms get the envelope."""
    for wav in ctx.wavs:
        data = open(wav, "rb").read()
        want = cli_transcript(ctx, wav, False)["text"].strip()
        r = transcribe(ctx, {"model": "whisper"}, {"file": ("clip.wav", data)})
        assert r.status == 200 and r.json() == {"text": want}, f"{wav}: {r.status} {r.body[:200]!r}"
        r = transcribe(ctx, {"model": "whisper", "response_format": "text"}, {"file": ("clip.wav", data)})
        assert r.body.decode() == want + "\n" and r.headers["content-type"].startswith("text/plain")
        timed = cli_transcript(ctx, wav, True)
        r = transcribe(ctx, {"model": "whisper", "response_format": "verbose_json"}, {"file": ("clip.wav", data)})
        v = r.json()
        assert v["text"] == timed["text"].strip() and v["language"] and v["duration"] > 0, v
        got = [(s["start"], s["end"], s["text"], s["tokens"]) for s in v["segments"]]
        assert got == [(s["start"], s["end"], s["text"], s["tokens"]) for s in timed["segments"]], f"{wav}: segments differ"
        srt = transcribe(ctx, {"model": "whisper", "response_format": "srt"}, {"file": ("clip.wav", data)}).body.decode()
        vtt = transcribe(ctx, {"model": "whisper", "response_format": "vtt"}, {"file": ("clip.wav", data)}).body.decode()
        assert vtt.startswith("WEBVTT\n\n") and srt.count(" --> ") == vtt.count(" --> ") == len(got), (srt[:200], vtt[:200])
        if got:
            first = got[0]
            stamp = f"{int(first[0] // 60):02d}:{first[0] % 60:06.3f}".replace(".", ",")
            assert srt.startswith(f"1\n00:{stamp} --> "), srt[:60]
    wav = open(ctx.wavs[0], "rb").read()
    for fields, files, status, param in (
            ({"model": "whisper"}, {"file": ("notes.txt", b"not audio at all")}, 400, "file"),
            ({"model": "whisper"}, {}, 400, "file"),
            ({}, {"file": ("a.wav", wav)}, 400, "model"),
            ({"model": "nope"}, {"file": ("a.wav", wav)}, 404, "model"),
            ({"model": "llama"}, {"file": ("a.wav", wav)}, 400, "model"),
            ({"model": "whisper", "response_format": "docx"}, {"file": ("a.wav", wav)}, 400, "response_format"),
            ({"model": "whisper", "temperature": "0.7"}, {"file": ("a.wav", wav)}, 400, "temperature"),
            ({"model": "whisper", "prompt": "earlier words"}, {"file": ("a.wav", wav)}, 400, "prompt")):
        r = transcribe(ctx, fields, files)
        e = r.openai_error()
        assert r.status == status and e["param"] == param, f"{fields} {list(files)}: {r.status} {e}"
    # Each clip was read twice without timestamps (json, text) and three times with them: every
    # window came from the feature cache at least once after the encoder ran on it.
    m = ctx.server.metrics()
    encoded = metric(m, "mminfer_encoder_inputs_total", model="whisper", source="encoder")
    reused = metric(m, "mminfer_encoder_inputs_total", model="whisper", source="cache")
    assert reused >= encoded > 0, f"{encoded:.0f} windows encoded, {reused:.0f} from the feature cache"
    r = ctx.server.request("POST", "/v1/audio/transcriptions", body=b'{"model": "whisper"}',
                           headers={"Content-Type": "application/json"})
    assert r.status == 400 and "multipart/form-data" in r.openai_error()["message"]
    body, ctype = multipart({"model": "whisper"}, {"file": ("a.wav", wav)})
    r = ctx.server.request("POST", "/v1/audio/transcriptions", body=body[:len(body) // 2], headers={"Content-Type": ctype})
    assert r.status == 400 and "closing boundary" in r.openai_error()["message"], r.body[:200]


def test_page_chats_and_transcribes(ctx):
    """The page at / in headless Chromium: a two-turn chat whose answers stream in as events and
    equal the API's whole answers for the same conversation, a question about an image chosen
    in the chat, and an audio file transcribed."""
    from devtools import Chromium
    browser = Chromium()
    try:
        page = browser.page()
        page.navigate(f"http://{ctx.server.host}:{ctx.server.port}/")
        page.wait_for("document.querySelectorAll('#chat-model option').length > 0", what="the model list")
        page.evaluate("document.getElementById('chat-model').value = 'llama'; "
                      "document.getElementById('max-tokens').value = '24'; true")
        history = []
        for turn, text in enumerate(("what is in the box?", "and then?")):
            page.evaluate(f"document.getElementById('message').value = {json.dumps(text)}; "
                          "document.getElementById('send').click(); true")
            shown = page.wait_for(f"(() => {{ const a = document.querySelectorAll('#chat .assistant.done, #chat .err'); "
                                  f"return a.length > {turn} && [a[{turn}].className, a[{turn}].textContent]; }})()",
                                  timeout=120, what=f"answer {turn + 1}")
            assert shown[0] != "err", f"the page shows an error: {shown[1]}"
            history.append({"role": "user", "content": text})
            want = ctx.server.post_json("/v1/chat/completions", {"model": "llama", "messages": history, "max_tokens": 24}).json()
            want = want["choices"][0]["message"]["content"]
            assert shown[1] == want, f"turn {turn + 1}: the page shows {shown[1]!r}, the API answers {want!r}"
            history.append({"role": "assistant", "content": want})
        events = page.evaluate("window.chatEvents")
        assert events > 4, f"the page read {events} events: the answers did not stream"
        # A chat about an image with the vision-language model: the page's answer is the API's.
        image = os.path.join(ctx.work, "page-image.png")
        from PIL import Image
        Image.new("RGB", (96, 64), (40, 160, 90)).save(image)
        page.navigate(f"http://{ctx.server.host}:{ctx.server.port}/")
        page.wait_for("document.querySelectorAll('#chat-model option').length > 0", what="the model list")
        page.evaluate("document.getElementById('chat-model').value = 'vlm'; document.getElementById('max-tokens').value = '16'; true")
        root = page.call("DOM.getDocument")["root"]["nodeId"]
        node = page.call("DOM.querySelector", nodeId=root, selector="#chat-image")["nodeId"]
        page.call("DOM.setFileInputFiles", nodeId=node, files=[image])
        page.evaluate("document.getElementById('message').value = 'what colour is it?'; document.getElementById('send').click(); true")
        shown = page.wait_for("(() => { const a = document.querySelectorAll('#chat .assistant.done, #chat .err'); "
                              "return a.length > 0 && [a[0].className, a[0].textContent]; })()", timeout=120, what="the image answer")
        assert shown[0] != "err", f"the page shows an error: {shown[1]}"
        url = "data:image/png;base64," + base64.b64encode(open(image, "rb").read()).decode()
        want = ctx.server.post_json("/v1/chat/completions", image_chat(url, "what colour is it?", max_tokens=16)).json()
        assert shown[1] == want["choices"][0]["message"]["content"], f"the page shows {shown[1]!r}, the API answers {want}"
        page.evaluate("document.getElementById('speech-model').value = 'whisper'; true")
        root = page.call("DOM.getDocument")["root"]["nodeId"]
        node = page.call("DOM.querySelector", nodeId=root, selector="#audio")["nodeId"]
        page.call("DOM.setFileInputFiles", nodeId=node, files=[os.path.abspath(ctx.wavs[1])])
        got = page.wait_for("document.querySelector('#transcript-text, #transcript .err') && "
                            "document.querySelector('#transcript').textContent", timeout=120, what="the transcript")
        assert got == cli_transcript(ctx, ctx.wavs[1], False)["text"].strip(), f"the page shows {got!r}"
        page.close()
    finally:
        browser.quit()


def test_openai_npm_client(ctx):
    """The official `openai` npm client (tools/node_modules, installed by scripts/bootstrap)."""
    node = os.environ.get("MMINFER_NODE") or shutil.which("node")
    assert node, "node is not installed: run scripts/bootstrap"
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, NODE_PATH=os.path.join(here, "..", "..", "tools", "node_modules"))
    p = subprocess.run([node, os.path.join(here, "openai_generate_client.js"), "--url",
                        f"http://{ctx.server.host}:{ctx.server.port}", "--model", "llama", "--audio-model", "whisper",
                        "--audio", ctx.wavs[1], "--audio-text", cli_transcript(ctx, ctx.wavs[1], False)["text"].strip()],
                       capture_output=True, text=True, timeout=240, env=env)
    print(p.stdout, end="")
    assert p.returncode == 0, f"the openai client's checks failed (exit {p.returncode}): {p.stderr.strip()[-500:]}"


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--mminfer", required=True)
    a.add_argument("--models", required=True)
    a.add_argument("--work", required=True)
    args = a.parse_args()
    os.makedirs(args.work, exist_ok=True)
    ctx = Context()
    ctx.mminfer = args.mminfer
    ctx.cli_cache = {}
    ctx.work = args.work
    repo = make_repository(args.models, args.work)
    ctx.folder = os.path.join(repo, "llama", "1")
    ref = json.load(open(os.path.join(args.models, "llama-tiny", "reference", "reference.json")))
    ctx.prompts = [ids for c in ref["cases"] for ids in c["prompt_ids"]]
    ctx.whisper = os.path.join(repo, "whisper", "1")
    clips = os.path.join(args.models, "whisper-tiny-test", "reference")
    ctx.wavs = [os.path.join(clips, n) for n in ("speech-0.4s.wav", "speech-2.5s.wav", "speech-31.3s.wav")]
    ctx.server = Server(args.mminfer, repo)
    try:
        ctx.server.wait_ready()
        failed = run_tests([test_models_lists_generators, test_completions_equal_cli_one_at_a_time,
                        test_concurrent_requests_equal_cli, test_stream_has_openais_shape,
                        test_n_choices_draw_from_consecutive_seeds, test_bad_requests_get_the_envelope_while_a_stream_goes_on,
                        test_full_queue_answers_429, test_clients_that_leave_free_their_sequences,
                        test_triton_generate_extension, test_audio_transcriptions, test_page_chats_and_transcribes,
                        test_openai_npm_client, test_later_turns_reuse_the_prefix, test_256_clients_get_answers_or_429,
                        test_kv_cache_bytes_bounds_the_blocks, test_vision_language_chat,
                        test_vision_language_chat_with_fewer_image_tokens,
                        test_special_tokens_show_when_asked, test_chat_with_input_audio, test_loadgen_generate,
                        test_metrics_count_generation], ctx)
    finally:
        ctx.server.stop()
    sys.exit(failed)


if __name__ == "__main__":
    main()
