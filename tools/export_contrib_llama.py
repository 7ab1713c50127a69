#!/usr/bin/env python3
"""Writes a LLaMA-style test decoder from tools/make_generative_models.py in the form that
onnxruntime-genai's model builder gives published ONNX LLMs for the CPU, so mminfer is tested
on the files people download:

    export_contrib_llama.py SRC OUT [--precision fp32|int4] [--accuracy-level N]

  SRC  a llama-* folder of make_generative_models.py (its weights are rebuilt from the same
       seed and checked against SRC's reference logits before anything is written)
  OUT  model.onnx + model.onnx.data, genai_config.json, the tokenizer and config files and
       SRC's reference/ (torch's greedy tokens and logits; reference.json says the layout)

The graph, as the builder writes it for the CPU execution provider:
  inputs   input_ids, attention_mask, past_key_values.{i}.key|value [B, kv, P, hd]
           (no position_ids: rotary positions come from seqlens_k inside the attention op)
  outputs  logits, present.{i}.key|value [B, kv, T, hd]
  attention_mask -> ReduceSum - 1 -> int32 seqlens_k; Shape[1] -> int32 total_sequence_length
  per layer: (Skip)SimplifiedLayerNormalization, one packed Q|K|V MatMul, com.microsoft
           GroupQueryAttention (do_rotary=1 with cos_cache/sin_cache initializers), o_proj
           MatMul, SkipSimplifiedLayerNormalization, gate/up MatMuls, Sigmoid*x*up, down MatMul
  int4:    every MatMul (lm_head included) as MatMulNBits, 4 bits, blocks of 32, symmetric
           (no zero points), accuracy_level 4 as the builder's CPU default (--accuracy-level)

Batched prompts are right-padded in this form: GroupQueryAttention takes each row's length from
seqlens_k, so a row's tokens must start at position 0 (tools/check_contrib_llama.py feeds it so).
OUT/stamp.txt holds a digest of this script, SRC's stamp and the options; a matching OUT is left
as it is."""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generative_torch as gm  # noqa: E402
from nbits_quant import quantize  # noqa: E402

import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnx.defs  # noqa: E402

# The builder writes opset 21 / IR 10; older onnx packages (Debian's 1.12) stop at 17 / 8.
OPSET = min(21, onnx.defs.onnx_opset_version())
IR_VERSION = min(10, onnx.IR_VERSION)
COPIED = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")
BLOCK = 32


def fail(msg):
    sys.exit(f"export_contrib_llama.py: error: {msg}")


def rebuild_torch(src):
    """The torch model of SRC from its config and make_generative_models.py's seed and gain,
    checked against SRC's first reference step so a drifted generator cannot go unnoticed."""
    import make_generative_models as mgm
    with open(os.path.join(src, "reference", "reference.json")) as f:
        info = json.load(f)
    name = info.get("model")
    if info.get("kind") != "decoder-only" or name not in mgm.LLAMA_CONFIGS:
        fail(f"{src} is not a llama folder of make_generative_models.py (model {name!r})")
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    torch.manual_seed(17)
    model = gm.LlamaForCausalLM(cfg).eval()
    mgm.scale_init([model], mgm.LLAMA_CONFIGS[name]["init_gain"])
    case = info["cases"][0]
    ref = {k: np.load(os.path.join(src, "reference", v)) for k, v in case["files"].items()}
    ids, mask = torch.from_numpy(ref["input_ids"]), torch.from_numpy(ref["attention_mask"])
    kv, hd = cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    past = [torch.zeros(ids.shape[0], kv, 0, hd) for _ in range(2 * cfg["num_hidden_layers"])]
    with torch.no_grad():
        logits = model(ids, mask, (mask.cumsum(-1) - 1).clamp(min=0), *past)[0][:, -1].numpy()
    if np.abs(logits - ref["logits"][0]).max() > 1e-5 * np.abs(ref["logits"][0]).max():
        fail(f"the rebuilt weights do not reproduce {src}'s reference (remake it with make_generative_models.py)")
    return model, cfg, info


class GraphWriter:
    """Collects nodes and initializers under the builder's names."""

    def __init__(self, precision, accuracy_level):
        self.nodes, self.inits, self.precision, self.accuracy_level = [], [], precision, accuracy_level

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op, inputs, name, outputs=None, domain="", **attrs):
        outputs = outputs or [f"{name}/output_0"]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs[0]

    def matmul(self, x, weight_kn, base):
        """MatMul of x by a [K, N] weight; as MatMulNBits for int4, named as ORT's quantizer does."""
        wname = base[1:].replace("/", ".") + ".weight"
        if self.precision == "fp32":
            return self.node("MatMul", [x, self.init(wname, weight_kn.astype(np.float32))], base)
        k, n = weight_kn.shape
        b, scales, _, _ = quantize(weight_kn.astype(np.float32), 4, BLOCK, symmetric=True)
        return self.node("MatMulNBits", [x, self.init(wname + "_Q4", b), self.init(wname + "_scales", scales)],
                         base + "_Q4", domain="com.microsoft", K=k, N=n, bits=4, block_size=BLOCK,
                         accuracy_level=self.accuracy_level)


def rotary_caches(cfg, hd):
    """cos/sin [max_position_embeddings, hd / 2], the first half of torch's cat(freqs, freqs)."""
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    t = torch.arange(cfg["max_position_embeddings"], dtype=torch.int64).type_as(inv_freq)
    freqs = torch.outer(t, inv_freq)
    return freqs.cos().numpy(), freqs.sin().numpy()


def build_graph(model, cfg, precision, accuracy_level):
    n, heads, kv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d, vocab = cfg["hidden_size"], cfg["vocab_size"]
    hd, eps = d // heads, cfg["rms_norm_eps"]
    g = GraphWriter(precision, accuracy_level)
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    one = g.init("/model/constants/INT64/1", np.array(1, np.int64))
    ones = g.init("/model/constants/INT64/[1]", np.array([1], np.int64))

    # attention_mask -> seqlens_k (each row's total length - 1) and total_sequence_length.
    base = "/model/attn_mask_reformat/attn_mask_subgraph"
    s = g.node("ReduceSum", ["attention_mask", ones], f"{base}/ReduceSum", keepdims=0)
    s = g.node("Sub", [s, ones], f"{base}/Sub")
    seqlens_k = g.node("Cast", [s], f"{base}/Sub/Cast", to=TensorProto.INT32)
    s = g.node("Shape", ["attention_mask"], f"{base}/Shape")
    s = g.node("Gather", [s, one], f"{base}/Gather", axis=0)
    total_len = g.node("Cast", [s], f"{base}/Gather/Cast", to=TensorProto.INT32)
    cos, sin = rotary_caches(cfg, hd)
    g.init("cos_cache", cos)
    g.init("sin_cache", sin)

    x = g.node("Gather", [g.init("model.embed_tokens.weight", sd["embed_tokens.weight"]), "input_ids"],
               "/model/embed_tokens/Gather")
    root, skip = x, None  # residual stream and the branch output to add to it

    def norm(weight, location, layer, last=False):
        nonlocal root
        w = g.init(f"model.layers.{layer}.{location}_layernorm.weight", weight)
        base = f"/model/layers.{layer}/{location}_layernorm"
        if skip is None:
            return g.node("SimplifiedLayerNormalization", [root, w], f"{base}/LayerNorm",
                          outputs=[f"{base}/output_0"], axis=-1, epsilon=eps, stash_type=1)
        outs = [f"{base}/output_0"] if last else [f"{base}/output_0", "", "", f"{base}/output_3"]
        out = g.node("SkipSimplifiedLayerNormalization", [root, skip, w], f"{base}/SkipLayerNorm",
                     outputs=outs, domain="com.microsoft", epsilon=eps)
        if not last:
            root = outs[3]
        return out

    for i in range(n):
        p = f"layers.{i}."
        h = norm(sd[p + "input_layernorm.weight"], "input", i)
        qkv = np.concatenate([sd[p + f"self_attn.{w}_proj.weight"].T for w in "qkv"], axis=1)
        h = g.matmul(h, qkv, f"/model/layers.{i}/attn/qkv_proj/MatMul")
        attn = f"/model/layers.{i}/attn/GroupQueryAttention"
        h = g.node("GroupQueryAttention", [h, "", "", f"past_key_values.{i}.key", f"past_key_values.{i}.value",
                                           seqlens_k, total_len, "cos_cache", "sin_cache"],
                   attn, outputs=[f"{attn}/output_0", f"present.{i}.key", f"present.{i}.value"], domain="com.microsoft",
                   num_heads=heads, kv_num_heads=kv, scale=float(1 / np.sqrt(hd)), local_window_size=-1,
                   softcap=0.0, do_rotary=1, rotary_interleaved=0)
        skip = g.matmul(h, sd[p + "self_attn.o_proj.weight"].T, f"/model/layers.{i}/attn/o_proj/MatMul")
        h = norm(sd[p + "post_attention_layernorm.weight"], "post_attention", i)
        gate = g.matmul(h, sd[p + "mlp.gate_proj.weight"].T, f"/model/layers.{i}/mlp/gate_proj/MatMul")
        up = g.matmul(h, sd[p + "mlp.up_proj.weight"].T, f"/model/layers.{i}/mlp/up_proj/MatMul")
        act = g.node("Sigmoid", [gate], f"/model/layers.{i}/mlp/act_fn/Sigmoid")
        act = g.node("Mul", [gate, act], f"/model/layers.{i}/mlp/act_fn/Mul")
        act = g.node("Mul", [act, up], f"/model/layers.{i}/mlp/Mul")
        skip = g.matmul(act, sd[p + "mlp.down_proj.weight"].T, f"/model/layers.{i}/mlp/down_proj/MatMul")
    h = norm(sd["norm.weight"], "final_norm", n, last=True)
    h = g.matmul(h, sd["lm_head.weight"].T, "/lm_head/MatMul")
    g.nodes[-1].output[0] = "logits"

    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch_size", "sequence_length", vocab])]
    for i in range(n):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", f32,
                                                        ["batch_size", kv, "past_sequence_length", hd]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", f32,
                                                         ["batch_size", kv, "total_sequence_length", hd]))
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
                             producer_name="mminfer tools/export_contrib_llama.py", ir_version=IR_VERSION)


def genai_config(cfg, gen):
    """genai_config.json with the fields and defaults the builder writes for this decoder."""
    n, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    eos = gen.get("eos_token_id", cfg.get("eos_token_id"))
    return {
        "model": {
            "bos_token_id": gen.get("bos_token_id", cfg.get("bos_token_id", 1)),
            "context_length": cfg["max_position_embeddings"],
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": "model.onnx",
                "head_size": cfg["hidden_size"] // heads,
                "hidden_size": cfg["hidden_size"],
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
                "num_attention_heads": heads,
                "num_hidden_layers": n,
                "num_key_value_heads": cfg["num_key_value_heads"],
            },
            "eos_token_id": eos,
            "pad_token_id": gen.get("pad_token_id", eos),
            "type": "llama",
            "vocab_size": cfg["vocab_size"],
        },
        "search": {"diversity_penalty": 0.0, "do_sample": False, "early_stopping": True, "length_penalty": 1.0,
                   "max_length": cfg["max_position_embeddings"], "min_length": 0, "no_repeat_ngram_size": 0,
                   "num_beams": 1, "num_return_sequences": 1, "past_present_share_buffer": True,
                   "repetition_penalty": 1.0, "temperature": 1.0, "top_k": 50, "top_p": 1.0},
    }


def stamp_of(src, precision, accuracy_level):
    h = hashlib.sha256(f"{precision} {accuracy_level} {torch.__version__} {onnx.__version__}".encode())
    for path in (os.path.abspath(__file__), os.path.join(HERE, "nbits_quant.py"), os.path.join(src, "stamp.txt")):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--precision", choices=["fp32", "int4"], default="fp32")
    ap.add_argument("--accuracy-level", type=int, choices=[0, 1, 2, 3, 4], default=4,
                    help="MatMulNBits accuracy_level for int4 (the builder's CPU default is 4: int8 activations in ORT)")
    args = ap.parse_args()
    for f in ("stamp.txt", "config.json", os.path.join("reference", "reference.json")):
        if not os.path.isfile(os.path.join(args.src, f)):
            fail(f"{os.path.join(args.src, f)} is missing (make {args.src} with make_generative_models.py)")
    stamp = stamp_of(args.src, args.precision, args.accuracy_level)
    stamp_path = os.path.join(args.out, "stamp.txt")
    if os.path.exists(stamp_path) and open(stamp_path).read().strip() == stamp:
        print(f"{args.out}: up to date")
        return
    torch.set_num_threads(1)
    model, cfg, info = rebuild_torch(args.src)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    proto = build_graph(model, cfg, args.precision, args.accuracy_level)
    onnx.save(proto, os.path.join(args.out, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="model.onnx.data", size_threshold=1024)
    for f in COPIED:
        if os.path.exists(os.path.join(args.src, f)):
            shutil.copy(os.path.join(args.src, f), args.out)
    gen = {}
    if os.path.exists(os.path.join(args.src, "generation_config.json")):
        with open(os.path.join(args.src, "generation_config.json")) as f:
            gen = json.load(f)
    with open(os.path.join(args.out, "genai_config.json"), "w") as f:
        json.dump(genai_config(cfg, gen), f, indent=4)
    shutil.copytree(os.path.join(args.src, "reference"), os.path.join(args.out, "reference"))
    precision = "fp32" if args.precision == "fp32" else f"int4 (block {BLOCK}, symmetric, accuracy_level {args.accuracy_level})"
    info.update(kind="decoder-only-contrib", precision=args.precision, weights=precision,
                accuracy_level=args.accuracy_level if args.precision == "int4" else None,
                model=f"{info['model']}-contrib-" + ("fp32" if args.precision == "fp32" else f"int4-acc{args.accuracy_level}"),
                layout="model.onnx (onnxruntime-genai model builder form: GroupQueryAttention, right-padded prompts)")
    with open(os.path.join(args.out, "reference", "reference.json"), "w") as f:
        json.dump(info, f, indent=1)
    with open(stamp_path, "w") as f:
        f.write(stamp + "\n")
    print(f"{info['model']}: written to {args.out}")


if __name__ == "__main__":
    main()
