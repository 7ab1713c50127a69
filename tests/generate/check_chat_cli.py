#!/usr/bin/env python3
"""`mminfer chat` on the SmolVLM-shaped vlm-tiny (tools/make_generative_models.py): for every
reference question and image, the PNG decoded and preprocessed in C++, the features spliced over the
image tokens, the decoder's cache owned by the runtime; the answer's tokens must equal torch's
greedy ones (up to an end token). Several questions about one image run the vision encoder once
(encoder_runs), with the same answers as with the feature cache off. The prompt comes from the
folder's chat template (chat_template.json here; chat_template.jinja first when present; Idefics3's
form when there is none), each giving torch's tokens. A vision encoder taking transformers.js's
5-D pixel_values [batch, images, 3, H, W] and pixel_attention_mask gives them too. With
do_image_splitting, a wide, a tall and a small image split into Idefics3's tiles and global image
(tools/idefics3_processor.py) give torch's tokens, with frames x image_seq_len image tokens. Bad
input and bad templates get one line.

    check_chat_cli.py --mminfer BIN --model DIR --work DIR"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import Checks, arguments  # noqa: E402

check = Checks()


def five_d_encoder(src, dst, images="num_images"):
    """vlm-tiny's vision encoder behind transformers.js's SmolVLM inputs: pixel_values
    [batch, images, 3, H, W] reshaped to [batch * images, 3, H, W], and pixel_attention_mask.
    images=1 fixes the images axis at one frame a run."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    m = onnx.load(src)
    g = m.graph
    old = g.input[0]
    h, w = [d.dim_value for d in old.type.tensor_type.shape.dim][2:]
    for n in g.node:
        for i, x in enumerate(n.input):
            if x == "pixel_values":
                n.input[i] = "pixel_values_4d"
    g.input.remove(old)
    g.input.append(helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch_size", images, 3, h, w]))
    g.input.append(helper.make_tensor_value_info("pixel_attention_mask", TensorProto.BOOL, ["batch_size", images, h, w]))
    g.initializer.append(numpy_helper.from_array(np.array([-1, 3, h, w], np.int64), "four_d_shape"))
    g.node.insert(0, helper.make_node("Reshape", ["pixel_values", "four_d_shape"], ["pixel_values_4d"]))
    onnx.save(m, dst)


def until_eos(tokens, eos):
    for stop in range(len(tokens)):
        if tokens[stop] in eos:
            return tokens[:stop + 1]
    return tokens


def variant(a, name, preprocessor, encoder=None):
    """A copy of vlm-tiny in the work folder with another preprocessor_config.json and, optionally,
    a vision encoder made by `encoder(src, dst)`."""
    folder = os.path.join(a.work, "vlm-" + name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for f in os.listdir(a.model):
        if f == "vision_encoder.onnx" and encoder:
            encoder(os.path.join(a.model, f), os.path.join(folder, f))
        elif f.endswith(".onnx"):
            os.symlink(os.path.join(a.model, f), os.path.join(folder, f))
        elif f != "reference":
            shutil.copy(os.path.join(a.model, f), folder)
    json.dump(preprocessor, open(os.path.join(folder, "preprocessor_config.json"), "w"))
    return folder


def chat(a, folder, image, questions, *extra):
    p = subprocess.run([a.mminfer, "chat", "--pipeline", folder, "--image", image, *questions, "--json", *extra],
                       capture_output=True, text=True, timeout=300)
    return p, [json.loads(line) for line in p.stdout.splitlines()] if p.returncode == 0 else []


def relevance_keep(share):
    """The rows image-token pruning keeps: the most cosine-similar to the mean embedding of the
    prompt's other tokens, ceil((1 - share) * N) of them, ties to the earlier row."""
    import numpy as np

    def keep(features, ids, embeds, image_token):
        query = embeds[ids != image_token].astype(np.float64).mean(0)
        f = features.astype(np.float64)
        score = f @ query / (np.linalg.norm(f, axis=1) * np.linalg.norm(query))
        n = len(f)
        count = max(1, int(np.ceil((1 - share) * n - 1e-9)))
        order = sorted(range(n), key=lambda r: (-score[r], r))
        rows = np.zeros(n, bool)
        rows[order[:count]] = True
        return rows
    return keep


def check_image_token_pruning(a, ref):
    """--prune-image-tokens S: the tokens ONNX Runtime's present->past loop makes on the same files
    when the prompt keeps only the rows the relevance rule picks."""
    import numpy as np
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
    sys.path.insert(0, tools)
    import check_generative_model as cgm  # noqa: E402
    case = ref["cases"][0]
    name = case["case"]
    data = {k: np.load(os.path.join(a.model, "reference", f"{name}.{k}.npy"))
            for k in ("input_ids", "attention_mask", "pixel_values", "image_features")}
    info = dict(ref, new_tokens=12)
    runner = cgm.OrtRunner()
    try:
        for share in ("0.5", "0.75"):
            keep = relevance_keep(float(share))
            want, _, _ = cgm.vlm_loop(runner, a.model, info, data,
                                      keep=lambda f, ids, e: keep(f, ids, e, ref["image_token_id"]))
            p, docs = chat(a, a.model, os.path.join(a.model, "reference", case["images"][0]), case["questions"][:1],
                           "--prune-image-tokens", share, "--max-new-tokens", "12")
            got = docs[0]["tokens"] if docs else p.stderr.strip()
            check(got == want[0].tolist(), f"--prune-image-tokens {share}: ONNX Runtime's tokens {want[0].tolist()}, got {got}")
            n = data["image_features"].shape[0] * data["image_features"].shape[1]
            kept = int(np.ceil((1 - float(share)) * n - 1e-9))
            check(docs and docs[0].get("image_tokens") == [kept, n] and docs[0]["prompt_tokens"] == data["input_ids"].shape[1] - (n - kept),
                  f"--prune-image-tokens {share}: image_tokens {docs[0].get('image_tokens') if docs else None}, "
                  f"prompt_tokens {docs[0].get('prompt_tokens') if docs else None}")
            print(f"--prune-image-tokens {share}: {kept} of {n} image tokens read; ONNX Runtime's tokens")
    finally:
        runner.close()
    for bad, needle in ((["--prune-image-tokens", "1"], "0 to below 1"), (["--prune-image-tokens", "-0.1"], "0 to below 1")):
        p, _ = chat(a, a.model, os.path.join(a.model, "reference", case["images"][0]), ["hi"], *bad)
        check(p.returncode != 0 and needle in p.stderr, f"{' '.join(bad)} refused: {p.stderr.strip()[:200]}")


def check_splitting(a, ref, eos):
    """do_image_splitting: the tiles and global image of idefics3_processor.py's reference, torch's
    tokens for a wide, a tall and a small (unsplit) image; the frames through the encoder as one
    batch (4-D and 5-D inputs) or one per run; the feature cache keyed on every frame."""
    seq = json.load(open(os.path.join(a.model, "config.json")))["image_seq_len"]
    refdir = os.path.join(a.model, "reference")
    folders = {}
    for c in ref["split_cases"]:
        pre = json.load(open(os.path.join(refdir, c["preprocessor"])))
        folder = folders.setdefault(c["preprocessor"], variant(a, c["preprocessor"].split(".")[1], pre))
        want = until_eos(c["tokens"], eos)
        image = os.path.join(refdir, c["image"])
        p, r = chat(a, folder, image, [c["question"]], "--max-new-tokens", str(ref["new_tokens"]))
        r = r[0] if r else {}
        check(c["image_tokens"] == c["frames"] * seq and c["prompt_ids"].count(ref["image_token_id"]) == c["image_tokens"],
              f"{c['case']}: the reference prompt holds {c['frames']} frames x {seq} image tokens")
        check(r.get("tokens") == want and r.get("prompt_tokens") == len(c["prompt_ids"]) and r.get("image_frames") == c["frames"],
              f"split {c['case']} {c['size'][0]}x{c['size'][1]}: {c['rows']}x{c['cols']} tiles, {r.get('image_frames')} frames, "
              f"{r.get('prompt_tokens')} prompt tokens, {len(want)} tokens equal torch's {p.stderr.strip()[:200]}")
    wide = ref["split_cases"][0]
    pre = json.load(open(os.path.join(refdir, wide["preprocessor"])))
    image = os.path.join(refdir, wide["image"])
    want = until_eos(wide["tokens"], eos)
    for name, encoder in (("split-5d", five_d_encoder), ("split-5d-one", lambda s, d: five_d_encoder(s, d, images=1))):
        p, r = chat(a, variant(a, name, pre, encoder), image, [wide["question"]], "--max-new-tokens", str(ref["new_tokens"]))
        check(r and r[0]["tokens"] == want and r[0]["image_frames"] == wide["frames"],
              f"{name}: the {wide['frames']} frames through a 5-D encoder give torch's tokens {p.stderr.strip()[:200]}")
    folder = folders[wide["preprocessor"]]
    questions = [wide["question"], "Describe the shapes and their colours."]
    _, cached = chat(a, folder, image, questions, "--max-new-tokens", "6", "--feature-cache-mb", "256")
    _, plain = chat(a, folder, image, questions, "--max-new-tokens", "6", "--feature-cache-mb", "0")
    check(len(cached) == 2 and [r["encoder_runs"] for r in cached] == [1, 1] and len(plain) == 2
          and [r["tokens"] for r in cached] == [r["tokens"] for r in plain],
          "a split image: one encoder run for two questions, the same answers as without the cache")
    # Bad input: a split too large for the context; splitting without a tile size.
    big = dict(pre, size={"longest_edge": 5 * pre["max_image_size"]["longest_edge"]})
    p, _ = chat(a, variant(a, "split-big", big), image, ["hi"])
    check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "context" in p.stderr and "tiles" in p.stderr,
          f"a split past the context: one line: {p.stderr.strip()[:200]}")
    untiled = {k: v for k, v in pre.items() if k != "max_image_size"}
    p, _ = chat(a, variant(a, "split-untiled", untiled), image, ["hi"])
    check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "max_image_size" in p.stderr,
          f"splitting without max_image_size: one line: {p.stderr.strip()[:200]}")


def main():
    a = arguments()
    ref = json.load(open(os.path.join(a.model, "reference", "reference.json")))
    eos = json.load(open(os.path.join(a.model, "generation_config.json")))["eos_token_id"]
    eos = eos if isinstance(eos, list) else [eos]
    for case in ref["cases"]:
        for q, img, ids, want in zip(case["questions"], case["images"], case["prompt_ids"], case["tokens"]):
            for stop in range(len(want)):
                if want[stop] in eos:
                    want = want[:stop + 1]
                    break
            p = subprocess.run([a.mminfer, "chat", "--pipeline", a.model, "--image", os.path.join(a.model, "reference", img),
                                q, "--max-new-tokens", str(ref["new_tokens"]), "--json"], capture_output=True, text=True, timeout=300)
            r = json.loads(p.stdout) if p.returncode == 0 else {}
            check(r.get("tokens") == want and r.get("prompt_tokens") == len(ids) and r.get("chat_template") == "chat_template.json",
                  f"{case['case']} {img} '{q}': {len(want)} tokens equal torch's {p.stderr.strip()[:200] if p.returncode else ''}")
    # Two questions about one image: one encoder run with the feature cache, two without; same tokens.
    first = ref["cases"][0]
    image = os.path.join(a.model, "reference", first["images"][0])
    questions = [first["questions"][0], "Describe the shapes and their colours."]
    runs = {}
    for mb in ("256", "0"):
        p = subprocess.run([a.mminfer, "chat", "--pipeline", a.model, "--image", image, *questions, "--max-new-tokens", "6",
                            "--json", "--feature-cache-mb", mb], capture_output=True, text=True, timeout=300)
        runs[mb] = [json.loads(line) for line in p.stdout.splitlines()] if p.returncode == 0 else []
    cached, plain = runs["256"], runs["0"]
    check(len(cached) == 2 and [r["encoder_runs"] for r in cached] == [1, 1], f"two questions, one encoder run: {cached and [r['encoder_runs'] for r in cached]}")
    check(len(plain) == 2 and [r["encoder_runs"] for r in plain] == [1, 2], "--feature-cache-mb 0: an encoder run per question")
    check(len(cached) == 2 and [r["tokens"] for r in cached] == [r["tokens"] for r in plain],
          "the same answers with the feature cache as without")
    p = subprocess.run([a.mminfer, "chat", "--pipeline", a.model, "hi", "--feature-cache-mb", "-1"], capture_output=True, text=True)
    check(p.returncode != 0 and "--feature-cache-mb" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          f"a negative --feature-cache-mb: {p.stderr.strip()[:200]}")
    # The template's source: chat_template.jinja first (this one written over lines, the same text),
    # none at all (Idefics3's form by hand), a template outside the subset, raise_exception.
    want = first["tokens"][0]
    for stop in range(len(want)):
        if want[stop] in eos:
            want = want[:stop + 1]
            break
    jinja_form = ("{%- for message in messages -%}\n  {{- '<|im_start|>' if loop.first }}{{ message.role | capitalize }}\n"
                  "  {%- if message.content[0].type == 'image' %}:{% else %}: {% endif %}\n"
                  "  {%- for part in message.content %}\n    {%- if part.type == 'text' %}{{ part.text }}"
                  "{% elif part.type == 'image' %}<image>{% endif %}\n  {%- endfor -%}\n"
                  "<end_of_utterance>\n{% endfor %}\n{%- if add_generation_prompt %}Assistant:{% endif %}\n")
    forms = {"jinja": ("chat_template.jinja", jinja_form, "chat_template.jinja"), "none": (None, None, None),
             "macro": ("chat_template.jinja", "{% macro m() %}{% endmacro %}", "{% macro %} is not supported"),
             "raise": ("chat_template.jinja", "{{ raise_exception('Only text is supported') }}", "Only text is supported"),
             "5d": (None, None, "chat_template.json")}
    for name, (file, text, expect) in forms.items():
        folder = os.path.join(a.work, "vlm-" + name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for f in os.listdir(a.model):
            if f == "vision_encoder.onnx" and name == "5d":
                five_d_encoder(os.path.join(a.model, f), os.path.join(folder, f))
            elif f.endswith(".onnx"):
                os.symlink(os.path.join(a.model, f), os.path.join(folder, f))
            elif f not in ("reference", "chat_template.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(a.model, f), folder)
        tok = json.load(open(os.path.join(a.model, "tokenizer_config.json")))
        if name not in ("jinja", "5d"):
            tok.pop("chat_template", None)
        json.dump(tok, open(os.path.join(folder, "tokenizer_config.json"), "w"))
        if name in ("jinja", "5d"):
            shutil.copy(os.path.join(a.model, "chat_template.json"), folder)
        if file:
            open(os.path.join(folder, file), "w").write(text)
        p = subprocess.run([a.mminfer, "chat", "--pipeline", folder, "--image", image, first["questions"][0],
                            "--max-new-tokens", str(ref["new_tokens"]), "--json"], capture_output=True, text=True, timeout=300)
        if name in ("jinja", "none", "5d"):
            r = json.loads(p.stdout) if p.returncode == 0 else {}
            check(r.get("tokens") == want and r.get("chat_template") == expect,
                  f"{name}: prompt from {expect or 'Idefics3s form'}: torch's tokens {p.stderr.strip()[:200]}")
        else:
            check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and expect in p.stderr and file in p.stderr,
                  f"a template with {name}: one line: {p.stderr.strip()[:200]}")
    check_splitting(a, ref, eos)
    check_image_token_pruning(a, ref)
    junk = os.path.join(a.work, "junk.png")
    open(junk, "wb").write(b"not an image")
    p = subprocess.run([a.mminfer, "chat", "--pipeline", a.model, "--image", junk, "hi"], capture_output=True, text=True)
    check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, f"a bad image: {p.stderr.strip()[:200]}")
    p = subprocess.run([a.mminfer, "chat", "--pipeline", a.model, "hi", "--max-new-tokens", "4", "--json"],
                       capture_output=True, text=True)
    check(p.returncode == 0 and len(json.loads(p.stdout)["tokens"]) <= 4, "a question without an image")
    p = subprocess.run([a.mminfer, "chat", "--pipeline", a.work, "hi"], capture_output=True, text=True)
    check(p.returncode == 1 and "config.json is missing" in p.stderr, "a folder without the model")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
