#!/usr/bin/python3
"""The page at / in a real browser: headless Chromium, driven through the DevTools protocol,
uses it as a person would.

  page_chromium.py --mminfer BIN DIR      (DIR: tools/make_serve_repository.py's OUT)

  OCR       the rendered line is set on the file input (DOM.setFileInputFiles, as choosing a
            file does): #lines must list its text and the canvas show the image with boxes drawn
  classify  an image is dropped on the drop zone (a drop event carrying a File) with labels
            typed in: #scores must list those labels, highest first, percentages adding to 100
  embed     text typed and the button clicked: #dims must give the clip model's dimensions
Prints one line per check and 'N passed, N failed'."""
import argparse
import base64
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devtools import Chromium  # noqa: E402
from serve_harness import Server, run_tests  # noqa: E402

# The stroke colour the page draws OCR boxes with (#e0218a).
BOX_RGB = (0xE0, 0x21, 0x8A)


class Context:
    pass


def no_error_shown(page, what):
    err = page.evaluate("Array.from(document.querySelectorAll('.err')).map(e => e.textContent).join(' | ')")
    assert not err, f"{what}: the page shows an error: {err}"


def test_ocr_by_choosing_a_file(ctx):
    page, line = ctx.page, ctx.inputs["ocr_line"]
    page.navigate(ctx.url)
    root = page.call("DOM.getDocument")["root"]["nodeId"]
    node = page.call("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
    assert node, "the page has no #file input"
    page.call("DOM.setFileInputFiles", nodeId=node, files=[os.path.abspath(line["file"])])
    items = page.wait_for("document.querySelector('#lines') && "
                          "Array.from(document.querySelectorAll('#lines li')).map(li => li.firstChild.textContent.trim())",
                          timeout=120, what="#lines") or []
    no_error_shown(page, "OCR")
    read = " ".join(items)
    assert "".join(read.split()) == "".join(line["text"].split()), f"#lines shows {items}, the image says {line['text']!r}"
    # The canvas holds the image at its size, with the line's box stroked in the page's colour.
    drawn = page.evaluate(f"""(() => {{
        const c = document.getElementById('canvas');
        if (c.hidden) return null;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let box = 0;
        for (let i = 0; i < d.length; i += 4)
          if (Math.abs(d[i] - {BOX_RGB[0]}) < 40 && Math.abs(d[i + 1] - {BOX_RGB[1]}) < 40 && Math.abs(d[i + 2] - {BOX_RGB[2]}) < 40) box++;
        return {{width: c.width, height: c.height, box}};
    }})()""")
    assert drawn, "the canvas stayed hidden after OCR"
    with open(line["file"], "rb") as f:
        png = f.read()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (drawn["width"], drawn["height"]) == (width, height), f"canvas {drawn}, image {width}x{height}"
    assert drawn["box"] > 2 * (width + height) // 4, f"only {drawn['box']} pixels of box colour on the canvas"
    ctx.figures["ocr"] = f"#lines {items}; {drawn['box']} box pixels drawn"


def test_classify_by_dropping_an_image(ctx):
    page = ctx.page
    page.navigate(ctx.url)
    labels = ctx.inputs["clip_v1"]["labels"]
    with open(ctx.inputs["clip_images"][0], "rb") as f:
        b64 = base64.b64encode(f.read()).decode()
    page.evaluate(f"""(() => {{
        document.querySelector('input[name=task][value=classify]').checked = true;
        document.getElementById('labels').value = {json.dumps(', '.join(labels))};
        const bytes = Uint8Array.from(atob('{b64}'), (c) => c.charCodeAt(0));
        const dt = new DataTransfer();
        dt.items.add(new File([bytes], 'red.png', {{type: 'image/png'}}));
        const drop = document.getElementById('drop');
        drop.dispatchEvent(new DragEvent('dragover', {{dataTransfer: dt, bubbles: true, cancelable: true}}));
        drop.dispatchEvent(new DragEvent('drop', {{dataTransfer: dt, bubbles: true, cancelable: true}}));
        return true;
    }})()""")
    rows = page.wait_for("document.querySelector('#scores') && Array.from(document.querySelectorAll('#scores tr'))"
                         ".map(tr => Array.from(tr.cells).map(td => td.textContent))", timeout=60, what="#scores")
    no_error_shown(page, "classify")
    shown = [r[0] for r in rows]
    assert sorted(shown) == sorted(labels), f"#scores lists {shown}, the labels typed were {labels}"
    percents = [float(r[1].rstrip("%")) for r in rows]
    assert percents == sorted(percents, reverse=True), f"#scores must list the highest first: {rows}"
    assert abs(sum(percents) - 100) <= 0.1 * len(percents), f"percentages add up to {sum(percents)}: {rows}"
    ctx.figures["classify"] = rows


def test_embed_typed_text(ctx):
    page = ctx.page
    page.navigate(ctx.url)
    page.evaluate("document.getElementById('text').value = 'a photo of a cat.'; document.getElementById('embed').click(); true")
    dims = page.wait_for("document.querySelector('#dims') && document.querySelector('#dims').textContent", timeout=60,
                         what="#dims")
    no_error_shown(page, "embed")
    meta = ctx.server.get("/v1/embeddings")  # 405, but proves the server is still there
    assert meta.status == 405, f"GET /v1/embeddings: expected 405, got {meta.status}"
    r = ctx.server.post_json("/v1/embeddings", {"model": "clip", "input": "a photo of a cat."}).json()
    n = len(r["data"][0]["embedding"])
    assert dims.startswith(f"{n} dimensions: "), f"#dims says {dims!r}, the model gives {n} dimensions"
    first = r["data"][0]["embedding"][0]
    assert f"{first:.4f}" in dims, f"#dims {dims!r} should start with the embedding's first value {first:.4f}"


def test_key_field_reaches_a_server_with_keys(ctx):
    """With API keys, the page's calls carry the key typed in its field; without it they are refused."""
    key = "page-key-4c1d"
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        os.makedirs(repo)
        os.symlink(os.path.abspath(os.path.join(ctx.dir, "repository", "clip")), os.path.join(repo, "clip"))
        keys = os.path.join(tmp, "keys")
        with open(keys, "w", encoding="utf-8") as f:
            f.write(key + "\n")
        keyed = Server(ctx.mminfer, repo, extra=["--api-key-file", keys])
        try:
            keyed.wait_ready()
            page = ctx.page
            page.navigate(f"http://{keyed.host}:{keyed.port}/")
            embed = "document.getElementById('text').value = 'a cat'; document.getElementById('embed').click(); true"
            page.evaluate(embed)
            refused = page.wait_for("document.querySelector('#embedding .err') && document.querySelector('#embedding .err').textContent",
                                    timeout=60, what="the error without a key")
            assert "key" in refused.lower(), f"without a key the page should say a key is needed, it says {refused!r}"
            page.evaluate(f"document.getElementById('key').value = '{key}'; true")
            page.evaluate(embed)
            dims = page.wait_for("document.querySelector('#dims') && document.querySelector('#dims').textContent", timeout=60,
                                 what="#dims with the key")
            assert "dimensions" in dims, f"with the key: #dims says {dims!r}"
        finally:
            keyed.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mminfer", required=True)
    ap.add_argument("--chromium", help="the browser binary (default: chromium on PATH)")
    ap.add_argument("dir", help="make_serve_repository.py's OUT")
    args = ap.parse_args()

    ctx = Context()
    ctx.figures = {}
    with open(os.path.join(args.dir, "inputs", "inputs.json"), encoding="utf-8") as f:
        ctx.inputs = json.load(f)
    ctx.mminfer, ctx.dir = args.mminfer, args.dir
    ctx.server = Server(args.mminfer, os.path.join(args.dir, "repository"))
    browser = None
    try:
        ctx.server.wait_ready()
        ctx.url = f"http://{ctx.server.host}:{ctx.server.port}/"
        browser = Chromium(args.chromium)
        ctx.page = browser.page()
        code = run_tests([test_ocr_by_choosing_a_file, test_classify_by_dropping_an_image, test_embed_typed_text,
                          test_key_field_reaches_a_server_with_keys], ctx)
        ctx.page.close()
    finally:
        if browser:
            browser.quit()
        ctx.server.stop()
    for what, figure in ctx.figures.items():
        print(f"figure: {what}: {figure}")
    return code


if __name__ == "__main__":
    sys.exit(main())
