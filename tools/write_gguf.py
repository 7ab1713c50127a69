#!/usr/bin/env python3
"""Writes a GGUF (version 3) file that llama.cpp loads from a LLaMA-style folder made by
tools/make_generative_models.py (config.json, tokenizer.json, model.onnx), so llama.cpp can be
measured on exactly the weights mminfer and ONNX Runtime run.

    write_gguf.py FOLDER OUT.gguf [--type f32|q8_0|q4_0]

Weights come from model.onnx's initializers, found through the MatMul / Mul / Gather nodes the
torch export names after the modules (/layers.3/self_attn/q_proj/MatMul ...). The tokenizer is
byte-level BPE, which llama.cpp calls "gpt2": tokens, merges, token types and the special ids.

Rotary convention: the HF LLaMA layout (rotate_half) rotates dimension i with i + head_dim/2,
llama.cpp's LLAMA graph rotates adjacent pairs (2i, 2i+1). Reordering the rows of each Q and K
head from [first half, second half] to interleaved pairs makes llama.cpp's rotation compute the
same attention scores (q·k is invariant to a common permutation of both)."""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np

# gguf_type of metadata values and ggml_type of tensors (ggml docs/gguf.md).
GGUF_UINT32, GGUF_INT32, GGUF_FLOAT32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_Q4_0, GGML_Q8_0 = 0, 2, 8
# general.file_type (llama_ftype): all F32, mostly Q4_0, mostly Q8_0.
FILE_TYPES = {"f32": (GGML_F32, 0), "q4_0": (GGML_Q4_0, 2), "q8_0": (GGML_Q8_0, 7)}
# llama_token_type: normal, control (specials), user-defined (added, not special).
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4
ALIGNMENT = 32
QK = 32  # elements per Q8_0 / Q4_0 block


def fail(msg):
    sys.exit(f"write_gguf.py: error: {msg}")


# --- block quantization ----------------------------------------------------------------------

def blocks_of(w):
    """Rows of w cut into blocks of 32 along the input dimension (ggml's ne0)."""
    if w.shape[-1] % QK:
        fail(f"a row of {w.shape[-1]} values is not a whole number of {QK}-value blocks")
    return w.reshape(-1, QK).astype(np.float32)


def quantize_q8_0(w):
    """Q8_0: per block an fp16 scale d = max|x| / 127 and 32 int8 values round(x / d)."""
    x = blocks_of(w)
    d = np.abs(x).max(axis=1) / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    v = x * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)  # half away from zero, as roundf
    out = np.empty(len(x), dtype=[("d", "<f2"), ("qs", "i1", QK)])
    out["d"], out["qs"] = d.astype(np.float16), q
    return out.tobytes()


def quantize_q4_0(w):
    """Q4_0: per block an fp16 scale d = m / -8, where m is the value of largest magnitude (with
    its sign, so it maps to -8 exactly), and 32 4-bit codes min(15, floor(x / d + 8.5)); byte j
    holds value j in its low nibble and value j + 16 in its high nibble."""
    x = blocks_of(w)
    idx = np.abs(x).argmax(axis=1)
    m = x[np.arange(len(x)), idx]
    d = m / -8.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    codes = np.minimum(15, np.floor(x * inv[:, None] + 8.5)).astype(np.uint8)
    packed = codes[:, :QK // 2] | (codes[:, QK // 2:] << 4)
    out = np.empty(len(x), dtype=[("d", "<f2"), ("qs", "u1", QK // 2)])
    out["d"], out["qs"] = d.astype(np.float16), packed
    return out.tobytes()


def tensor_bytes(w, ggml_type):
    if ggml_type == GGML_F32:
        return np.ascontiguousarray(w, dtype="<f4").tobytes()
    return (quantize_q8_0 if ggml_type == GGML_Q8_0 else quantize_q4_0)(w)


# --- GGUF serialisation ----------------------------------------------------------------------

def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


SCALAR_FORMATS = {GGUF_UINT32: "<I", GGUF_INT32: "<i", GGUF_FLOAT32: "<f", GGUF_BOOL: "<?"}


def gguf_value(vtype, value):
    if vtype == GGUF_STRING:
        return gguf_string(value)
    if isinstance(vtype, tuple):  # (GGUF_ARRAY, element type)
        etype = vtype[1]
        head = struct.pack("<IQ", etype, len(value))
        if etype == GGUF_STRING:
            return head + b"".join(gguf_string(v) for v in value)
        return head + np.asarray(value, dtype=SCALAR_FORMATS[etype]).tobytes()
    return struct.pack(SCALAR_FORMATS[vtype], value)


def write_gguf(path, metadata, tensors):
    """metadata: [(key, type, value)]; tensors: [(name, array, ggml_type)] with numpy shape
    [rows, cols] written as GGUF dims [cols, rows] (ne0 is the fastest-varying)."""
    datas = [tensor_bytes(w, t) for _, w, t in tensors]
    head = bytearray(struct.pack("<4sIQQ", b"GGUF", 3, len(tensors), len(metadata)))
    for key, vtype, value in metadata:
        head += gguf_string(key)
        head += struct.pack("<I", GGUF_ARRAY if isinstance(vtype, tuple) else vtype)
        head += gguf_value(vtype, value)
    offset = 0
    offsets = []
    for (name, w, t), data in zip(tensors, datas):
        offsets.append(offset)
        dims = list(reversed(w.shape))
        head += gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        head += struct.pack("<IQ", t, offset)
        offset += -(-len(data) // ALIGNMENT) * ALIGNMENT
    head += b"\0" * (-len(head) % ALIGNMENT)
    try:
        with open(path, "wb") as f:
            f.write(head)
            for data in datas:
                f.write(data)
                f.write(b"\0" * (-len(data) % ALIGNMENT))
    except OSError as e:
        fail(f"cannot write {path}: {e.strerror}")


# --- reading the folder ----------------------------------------------------------------------

def onnx_weights(model_path):
    """{module path: weight as torch stores it} from the exported graph: Linear weights
    ([out, in]; the export stores them transposed for MatMul), RMSNorm weights, the embedding."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(model_path)
    g = model.graph
    values = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for n in g.node:  # constants and the Identity nodes the exporter leaves for shared weights
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        elif n.op_type == "Identity" and n.input[0] in values:
            values[n.output[0]] = values[n.input[0]]
    weights = {}
    for n in g.node:
        m = re.fullmatch(r"/((?:layers\.\d+/(?:self_attn|mlp)/\w+_proj)|lm_head)/MatMul", n.name)
        if n.op_type == "MatMul" and m and n.input[1] in values:
            weights[m.group(1).replace("/", ".")] = values[n.input[1]].T
        m = re.fullmatch(r"/((?:layers\.\d+/\w+_layernorm)|norm)/Mul_1", n.name)
        if n.op_type == "Mul" and m and n.input[1] in values:
            weights[m.group(1).replace("/", ".")] = values[n.input[1]]
        if n.op_type == "Gather" and n.name == "/embed_tokens/Gather" and n.input[0] in values:
            weights["embed_tokens"] = values[n.input[0]]
    return weights


def rope_interleave(w, heads):
    """Rows of each head from rotate_half order [x0..x(h/2-1), x(h/2)..] to adjacent pairs
    (x0, x(h/2)), (x1, x(h/2+1)), ...: the pairing llama.cpp's rotation uses."""
    out_dim, in_dim = w.shape
    hd = out_dim // heads
    return w.reshape(heads, 2, hd // 2, in_dim).swapaxes(1, 2).reshape(out_dim, in_dim)


def tokenizer_metadata(folder, config):
    try:
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            tok = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {os.path.join(folder, 'tokenizer.json')}: {e}")
    model = tok.get("model") or {}
    if model.get("type") != "BPE" or (tok.get("pre_tokenizer") or {}).get("type") != "ByteLevel":
        fail("tokenizer.json is not a byte-level BPE tokenizer (llama.cpp's \"gpt2\" model)")
    vocab = dict(model["vocab"])
    types = {}
    for t in tok.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        types[t["id"]] = TOKEN_CONTROL if t.get("special") else TOKEN_USER_DEFINED
    n = config["vocab_size"]
    by_id = {i: s for s, i in vocab.items()}
    missing = [i for i in range(n) if i not in by_id]
    if missing or len(by_id) != n:
        fail(f"tokenizer.json has {len(by_id)} tokens with ids {'missing ' + str(missing[0]) if missing else 'beyond the vocabulary'}"
             f", config.json's vocab_size is {n}")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    bos = config.get("bos_token_id")
    eos = config.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    pad = config.get("pad_token_id")
    meta = [("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
            ("tokenizer.ggml.pre", GGUF_STRING, "gpt-2"),
            ("tokenizer.ggml.tokens", (GGUF_ARRAY, GGUF_STRING), [by_id[i] for i in range(n)]),
            ("tokenizer.ggml.token_type", (GGUF_ARRAY, GGUF_INT32), [types.get(i, TOKEN_NORMAL) for i in range(n)]),
            ("tokenizer.ggml.merges", (GGUF_ARRAY, GGUF_STRING), merges),
            ("tokenizer.ggml.add_bos_token", GGUF_BOOL, False),
            ("tokenizer.ggml.add_eos_token", GGUF_BOOL, False)]
    for key, value in (("bos", bos), ("eos", eos), ("padding", pad)):
        if value is not None:
            meta.append((f"tokenizer.ggml.{key}_token_id", GGUF_UINT32, int(value)))
    return meta


def build(folder, out, kind):
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {os.path.join(folder, 'config.json')}: {e}")
    if config.get("model_type") != "llama":
        fail(f"config.json's model_type is {config.get('model_type')!r}; only LLaMA-style decoders are written")
    model_path = os.path.join(folder, "model.onnx")
    if not os.path.exists(model_path):
        fail(f"{model_path} is missing")
    d, n_layers = config["hidden_size"], config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", d // heads)
    try:
        weights = onnx_weights(model_path)
    except Exception as e:  # onnx's parse errors have no common type
        fail(f"cannot read {model_path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    ggml_type, file_type = FILE_TYPES[kind]

    def w(name, shape):
        if name not in weights:
            fail(f"model.onnx has no weight for {name} (not a LLaMA-style export of make_generative_models.py)")
        if tuple(weights[name].shape) != shape:
            fail(f"{name} has shape {tuple(weights[name].shape)}, config.json implies {shape}")
        return weights[name]

    # Norms stay F32 (as llama.cpp's converter keeps 1-D tensors); the embedding and every matrix
    # take the chosen type.
    tensors = [("token_embd.weight", w("embed_tokens", (config["vocab_size"], d)), ggml_type)]
    ffn = config["intermediate_size"]
    for i in range(n_layers):
        p = f"layers.{i}."
        tensors += [
            (f"blk.{i}.attn_norm.weight", w(p + "input_layernorm", (d,)), GGML_F32),
            (f"blk.{i}.attn_q.weight", rope_interleave(w(p + "self_attn.q_proj", (heads * head_dim, d)), heads), ggml_type),
            (f"blk.{i}.attn_k.weight", rope_interleave(w(p + "self_attn.k_proj", (kv_heads * head_dim, d)), kv_heads), ggml_type),
            (f"blk.{i}.attn_v.weight", w(p + "self_attn.v_proj", (kv_heads * head_dim, d)), ggml_type),
            (f"blk.{i}.attn_output.weight", w(p + "self_attn.o_proj", (d, heads * head_dim)), ggml_type),
            (f"blk.{i}.ffn_norm.weight", w(p + "post_attention_layernorm", (d,)), GGML_F32),
            (f"blk.{i}.ffn_gate.weight", w(p + "mlp.gate_proj", (ffn, d)), ggml_type),
            (f"blk.{i}.ffn_up.weight", w(p + "mlp.up_proj", (ffn, d)), ggml_type),
            (f"blk.{i}.ffn_down.weight", w(p + "mlp.down_proj", (d, ffn)), ggml_type)]
    tensors.append(("output_norm.weight", w("norm", (d,)), GGML_F32))
    if not config.get("tie_word_embeddings", False):  # tied: llama.cpp reuses token_embd
        tensors.append(("output.weight", w("lm_head", (config["vocab_size"], d)), ggml_type))

    metadata = [("general.architecture", GGUF_STRING, "llama"),
                ("general.name", GGUF_STRING, os.path.basename(os.path.normpath(folder))),
                ("general.file_type", GGUF_UINT32, file_type),
                ("general.alignment", GGUF_UINT32, ALIGNMENT),
                ("llama.context_length", GGUF_UINT32, config.get("max_position_embeddings", 2048)),
                ("llama.embedding_length", GGUF_UINT32, d),
                ("llama.block_count", GGUF_UINT32, n_layers),
                ("llama.feed_forward_length", GGUF_UINT32, ffn),
                ("llama.attention.head_count", GGUF_UINT32, heads),
                ("llama.attention.head_count_kv", GGUF_UINT32, kv_heads),
                ("llama.attention.key_length", GGUF_UINT32, head_dim),
                ("llama.attention.value_length", GGUF_UINT32, head_dim),
                ("llama.rope.dimension_count", GGUF_UINT32, head_dim),
                ("llama.rope.freq_base", GGUF_FLOAT32, float(config.get("rope_theta", 10000.0))),
                ("llama.attention.layer_norm_rms_epsilon", GGUF_FLOAT32, float(config.get("rms_norm_eps", 1e-6))),
                ("llama.vocab_size", GGUF_UINT32, config["vocab_size"])]
    metadata += tokenizer_metadata(folder, config)
    write_gguf(out, metadata, tensors)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("out")
    ap.add_argument("--type", default="f32", choices=sorted(FILE_TYPES))
    ap.add_argument("--no-rope-permute", action="store_true",
                    help="leave Q/K rows in the HF order (wrong for llama.cpp: shows the test catches it)")
    args = ap.parse_args()
    if args.no_rope_permute:
        global rope_interleave
        rope_interleave = lambda w, heads: w  # noqa: E731
    build(args.folder, args.out, args.type)


if __name__ == "__main__":
    main()
