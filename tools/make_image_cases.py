#!/usr/bin/python3
"""Writes image test cases and Pillow's answers for them into a build-tree folder.

Usage: make_image_cases.py OUT_DIR

Everything is made here at test time with Pillow (Debian's python3-pil) and numpy; nothing
binary is committed. OUT_DIR/manifest.txt lists one case per line, paths relative to OUT_DIR:

  decode <file> <expected.npy> <tolerance>        Pillow's open(file).convert("RGB"), uint8 HxWx3
  resize <source.npy> <filter> <w> <h> <expected.npy>   Pillow's Image.resize
  clip   <source.npy> <size> <expected_u8.npy> <expected_f32.npy>   short-side bicubic + centre crop,
                                                  then (v / 255 - mean) / std as float32 3xHxW
  exif   <file.jpg> <orientation> <expected.npy>  Pillow's ImageOps.exif_transpose(...).convert("RGB")
  bad    <file> <words the one-line error must contain>

A stamp of this script's hash lets a rerun return at once.
"""
import hashlib
import io
import os
import struct
import sys
import warnings
import zlib

import numpy as np
from PIL import Image, ImageDraw, ImageOps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import idefics3_processor  # noqa: E402

CLIP_MEAN = np.array([0.48145466, 0.4578275, 0.40821073])
CLIP_STD = np.array([0.26862954, 0.26130258, 0.27577711])
JPEG_TOLERANCE = 2  # the IDCT may differ between libjpeg builds; the tests report what they see


# --- source pictures ---------------------------------------------------------------------------

def gradient(w, h):
    x = np.linspace(0, 255, w)[None, :].repeat(h, 0)
    y = np.linspace(0, 255, h)[:, None].repeat(w, 1)
    return np.stack([x, y, (x + y) / 2 % 256], -1).round().astype(np.uint8)


def noise(w, h, seed):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def text_like(w, h):
    """Sharp black-on-white strokes and coloured boxes: edges where bicubic overshoots."""
    im = Image.new("RGB", (w, h), (255, 255, 255))
    d = ImageDraw.Draw(im)
    for i, y in enumerate(range(1, h, 12)):
        d.text((2 + (i % 3), y), "Hello mminfer 0123", fill=(0, 0, 0))
    d.rectangle([w // 3, h // 4, w // 2, h // 2], fill=(200, 30, 30))
    d.line([0, h - 1, w - 1, 0], fill=(20, 40, 220), width=2)
    return np.asarray(im)


def checker(w, h):
    """One-pixel checkerboard: the worst case for aliasing when shrinking."""
    c = ((np.arange(w)[None, :] + np.arange(h)[:, None]) % 2 * 255).astype(np.uint8)
    return np.stack([c, 255 - c, c // 2], -1)


def sources():
    return {
        "gradient_37x23": gradient(37, 23),
        "gradient_64x48": gradient(64, 48),
        "noise_101x77": noise(101, 77, 1),
        "noise_50x50": noise(50, 50, 2),
        "text_160x97": text_like(160, 97),
        "checker_33x64": checker(33, 64),
    }


# --- hand-written encoders for variants Pillow cannot save ---------------------------------------

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def pack_rows(a, depth):
    """Rows of an HxWxC (or HxW) integer array as PNG scanline bytes (without filter byte)."""
    a = a.reshape(a.shape[0], -1)
    if depth == 16:
        return [r.astype(">u2").tobytes() for r in a]
    if depth == 8:
        return [r.astype(np.uint8).tobytes() for r in a]
    per = 8 // depth
    rows = []
    for r in a:
        r = np.concatenate([r, np.zeros((-len(r)) % per, r.dtype)]).reshape(-1, per).astype(np.uint16)
        shifts = np.arange(per - 1, -1, -1) * depth
        rows.append((r << shifts).sum(1).astype(np.uint8).tobytes())
    return rows


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def write_png(path, a, color_type, depth, interlace=False, extra=b""):
    h, w = a.shape[:2]
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    raw = b""
    for xs, ys, xstep, ystep in passes:
        sub = a[ys::ystep, xs::xstep]
        if sub.shape[0] and sub.shape[1]:
            raw += b"".join(b"\0" + r for r in pack_rows(sub, depth))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlace else 0)
    data = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra
    data += png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def write_bmp(path, rows, w, h, bpp, compression=0, masks=None, palette=b"", top_down=False, dib=40):
    """rows: stored row bytes (bottom-up unless top_down), each unpadded."""
    stride = (w * bpp + 31) // 32 * 4
    pixels = b"".join(r + b"\0" * (stride - len(r)) for r in rows)
    mask_bytes = b"".join(struct.pack("<I", m) for m in masks) if masks else b""
    header = struct.pack("<IiiHHIIiiII", dib, w, -h if top_down else h, 1, bpp, compression, len(pixels),
                         2835, 2835, len(palette) // 4, 0)
    if dib == 40:
        header += mask_bytes
    else:  # V4/V5: masks (and alpha mask) inside the header, the rest zero
        header += (mask_bytes + b"\0" * 16)[:16] + b"\0" * (dib - 56)
    offset = 14 + len(header) + len(palette)
    data = b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + header + palette + pixels
    with open(path, "wb") as f:
        f.write(data)


def gif_blocks(data):
    """Offsets of the image descriptor and the logical screen fields in a GIF Pillow wrote."""
    pos = 13
    if data[10] & 0x80:
        pos += 3 << ((data[10] & 7) + 1)
    while data[pos] == 0x21:  # extensions: label, then sub-blocks up to a zero length
        pos += 2
        while data[pos]:
            pos += data[pos] + 1
        pos += 1
    assert data[pos] == 0x2C, "expected an image descriptor"
    return pos


def jpeg_with_exif(jpeg, tiff):
    app1 = b"Exif\0\0" + tiff
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpeg[2:]


# --- the cases ----------------------------------------------------------------------------------

class Cases:
    def __init__(self, out):
        self.out = out
        self.lines = []

    def path(self, name):
        return os.path.join(self.out, name)

    def save_npy(self, name, a):
        np.save(self.path(name), a)
        return name

    def decode(self, name, tolerance=0, expected=None):
        if expected is None:
            expected = np.asarray(Image.open(self.path(name)).convert("RGB"))
        self.lines.append(f"decode {name} {self.save_npy(name + '.npy', expected)} {tolerance}")

    def bad(self, name, data, words):
        with open(self.path(name), "wb") as f:
            f.write(data)
        self.lines.append(f"bad {name} {words}")


def make_decode_cases(c, src):
    for key in ["gradient_37x23", "noise_50x50", "text_160x97"]:
        a = src[key]
        im = Image.fromarray(a)
        # PNG through Pillow: RGB, gray, gray+alpha, RGBA, palette, palette + tRNS, 1-bit.
        im.save(c.path(f"{key}_rgb.png"))
        im.convert("L").save(c.path(f"{key}_l.png"))
        im.convert("LA").save(c.path(f"{key}_la.png"))
        rgba = np.dstack([a, np.arange(a.size // 3, dtype=np.uint8).reshape(a.shape[:2])])
        Image.fromarray(rgba, "RGBA").save(c.path(f"{key}_rgba.png"))
        p = im.quantize(37)
        p.save(c.path(f"{key}_p.png"))
        p.save(c.path(f"{key}_ptrns.png"), transparency=3)
        im.convert("1").save(c.path(f"{key}_1bit.png"))
        for suffix in ["rgb", "l", "la", "rgba", "p", "ptrns", "1bit"]:
            c.decode(f"{key}_{suffix}.png")
        # PNG by hand: 16-bit RGB, 16-bit gray, 16-bit gray+alpha, 2/4-bit gray, interlaced.
        wide = a.astype(np.uint16) * 257 + np.arange(a.size, dtype=np.uint16).reshape(a.shape) % 251
        write_png(c.path(f"{key}_rgb16.png"), wide, 2, 16)
        c.decode(f"{key}_rgb16.png")
        gray16 = wide[..., 0]
        write_png(c.path(f"{key}_l16.png"), gray16, 0, 16)
        # Pillow opens 16-bit gray as mode I and convert("RGB") clips it; we keep the high byte.
        c.decode(f"{key}_l16.png", expected=np.repeat((gray16 >> 8).astype(np.uint8)[..., None], 3, -1))
        write_png(c.path(f"{key}_la16.png"), np.dstack([gray16, wide[..., 1]]), 4, 16)
        c.decode(f"{key}_la16.png", expected=np.repeat((gray16 >> 8).astype(np.uint8)[..., None], 3, -1))
        for depth in (2, 4):
            levels = a[..., 1] >> (8 - depth)
            write_png(c.path(f"{key}_l{depth}.png"), levels, 0, depth)
            c.decode(f"{key}_l{depth}.png")
        write_png(c.path(f"{key}_interlaced.png"), a, 2, 8, interlace=True)
        c.decode(f"{key}_interlaced.png")
        pal = np.asarray(p.getpalette()[:37 * 3], np.uint8).tobytes()
        write_png(c.path(f"{key}_p4_interlaced.png"), np.asarray(p) % 16, 3, 4, interlace=True,
                  extra=png_chunk(b"PLTE", pal[:48]) + png_chunk(b"tRNS", b"\0\x80"))
        c.decode(f"{key}_p4_interlaced.png")

        # JPEG: 4:2:0, 4:4:4, progressive, gray, CMYK (Adobe, inverted).
        im.save(c.path(f"{key}_420.jpg"), quality=90)
        im.save(c.path(f"{key}_444.jpg"), quality=95, subsampling=0)
        im.save(c.path(f"{key}_progressive.jpg"), quality=85, progressive=True)
        im.convert("L").save(c.path(f"{key}_gray.jpg"), quality=90)
        im.convert("CMYK").save(c.path(f"{key}_cmyk.jpg"), quality=90)
        for suffix in ["420", "444", "progressive", "gray", "cmyk"]:
            c.decode(f"{key}_{suffix}.jpg", JPEG_TOLERANCE)

        # BMP through Pillow: 24-bit, 8-bit gray, 8-bit palette, 1-bit, 32-bit.
        im.save(c.path(f"{key}_24.bmp"))
        im.convert("L").save(c.path(f"{key}_l8.bmp"))
        p.save(c.path(f"{key}_p8.bmp"))
        im.convert("1").save(c.path(f"{key}_1bit.bmp"))
        Image.fromarray(rgba, "RGBA").save(c.path(f"{key}_32.bmp"))
        for suffix in ["24", "l8", "p8", "1bit", "32"]:
            c.decode(f"{key}_{suffix}.bmp")
        # BMP by hand: 16-bit 5-5-5 and 5-6-5, 32-bit bit fields (V5 header), 4-bit palette, top-down.
        h, w = a.shape[:2]
        r, g, b = (a[..., i].astype(np.uint32) for i in range(3))
        p555 = ((r >> 3) << 10 | (g >> 3) << 5 | (b >> 3)).astype("<u2")
        write_bmp(c.path(f"{key}_555.bmp"), [row.tobytes() for row in p555[::-1]], w, h, 16)
        p565 = ((r >> 3) << 11 | (g >> 2) << 5 | (b >> 3)).astype("<u2")
        write_bmp(c.path(f"{key}_565.bmp"), [row.tobytes() for row in p565[::-1]], w, h, 16, 3,
                  [0xF800, 0x07E0, 0x001F])
        bgra = (r << 16 | g << 8 | b | 0x80 << 24).astype("<u4")
        write_bmp(c.path(f"{key}_v5_32.bmp"), [row.tobytes() for row in bgra[::-1]], w, h, 32, 3,
                  [0xFF0000, 0xFF00, 0xFF, 0xFF000000], dib=124)
        idx4 = np.asarray(p) % 16
        pal4 = b"".join(bytes([pal[3 * i + 2], pal[3 * i + 1], pal[3 * i], 0]) for i in range(16))
        write_bmp(c.path(f"{key}_4bit.bmp"), pack_rows(idx4[::-1], 4), w, h, 4, palette=pal4)
        write_bmp(c.path(f"{key}_topdown.bmp"), [row[:, ::-1].tobytes() for row in a], w, h, 24, top_down=True)
        for suffix in ["555", "565", "v5_32", "4bit", "topdown"]:
            c.decode(f"{key}_{suffix}.bmp")

        # GIF: palette, interlaced and not, transparency, gray, two frames (first one kept).
        p.save(c.path(f"{key}_plain.gif"), interlace=False)
        p.save(c.path(f"{key}_interlaced.gif"), interlace=True)
        p.save(c.path(f"{key}_trns.gif"), transparency=5)
        im.convert("L").save(c.path(f"{key}_gray.gif"))
        second = Image.fromarray(255 - a).quantize(16)
        p.save(c.path(f"{key}_anim.gif"), save_all=True, append_images=[second], duration=100)
        for suffix in ["plain", "interlaced", "trns", "gray", "anim"]:
            c.decode(f"{key}_{suffix}.gif")

        # WebP: lossless, lossless with alpha, lossy, lossy with alpha, animated.
        im.save(c.path(f"{key}_lossless.webp"), lossless=True)
        Image.fromarray(rgba, "RGBA").save(c.path(f"{key}_lossless_alpha.webp"), lossless=True, exact=True)
        im.save(c.path(f"{key}_lossy.webp"), quality=80)
        Image.fromarray(rgba, "RGBA").save(c.path(f"{key}_lossy_alpha.webp"), quality=80)
        im.save(c.path(f"{key}_anim.webp"), save_all=True, append_images=[Image.fromarray(255 - a)], lossless=True)
        for suffix in ["lossless", "lossless_alpha", "lossy", "lossy_alpha", "anim"]:
            c.decode(f"{key}_{suffix}.webp")

    # GIF whose first frame sits at (5, 7) inside a larger screen, with transparency.
    small = Image.fromarray(src["gradient_37x23"][:10, :20]).quantize(8)
    buf = io.BytesIO()
    small.save(buf, "GIF", transparency=2)
    data = bytearray(buf.getvalue())
    at = gif_blocks(data)
    data[6:10] = struct.pack("<HH", 40, 30)
    data[at + 1:at + 5] = struct.pack("<HH", 5, 7)
    with open(c.path("offset_frame.gif"), "wb") as f:
        f.write(data)
    c.decode("offset_frame.gif")


def make_resize_cases(c, src):
    for key, a in src.items():
        h, w = a.shape[:2]
        name = c.save_npy(f"src_{key}.npy", a)
        targets = [(w // 3, h // 2 + 1), (int(w * 0.7), int(h * 0.45)), (w * 2 + 1, h + 5), (w // 2, h * 2),
                   (w, h // 3), (w + 7, h), (1, 1), (5, 3)]
        for tw, th in targets:
            tw, th = max(tw, 1), max(th, 1)
            for filt, pil in (("bilinear", Image.Resampling.BILINEAR), ("bicubic", Image.Resampling.BICUBIC),
                              ("lanczos", Image.Resampling.LANCZOS)):
                out = np.asarray(Image.fromarray(a).resize((tw, th), pil))
                ref = c.save_npy(f"resize_{key}_{filt}_{tw}x{th}.npy", out)
                c.lines.append(f"resize {name} {filt} {tw} {th} {ref}")


def make_split_cases(c, src):
    """Idefics3's splitting (idefics3_processor.py on Pillow): every frame's bytes, for a longest
    edge of three tiles, of one tile, and an odd one (the even-size rule)."""
    for key, a in src.items():
        name = f"src_{key}.npy"  # written by make_resize_cases
        for longest, tile in ((48, 16), (16, 16), (31, 8)):
            frames, rows, cols = idefics3_processor.split(a, longest, tile)
            refs = [c.save_npy(f"split_{key}_{longest}_{tile}_{i}.npy", f) for i, f in enumerate(frames)]
            c.lines.append(f"split {name} {longest} {tile} {rows} {cols} " + " ".join(refs))


def clip_reference(a, size):
    h, w = a.shape[:2]
    short, long = (w, h) if w <= h else (h, w)
    new_long = int(size * long / short)
    nw, nh = (size, new_long) if w <= h else (new_long, size)
    im = Image.fromarray(a).resize((nw, nh), Image.Resampling.BICUBIC)
    left, top = (nw - size) // 2, (nh - size) // 2
    u8 = np.asarray(im.crop((left, top, left + size, top + size)))
    f32 = ((u8 / 255.0 - CLIP_MEAN) / CLIP_STD).astype(np.float32).transpose(2, 0, 1)
    return u8, np.ascontiguousarray(f32)


def make_clip_cases(c, src):
    pictures = dict(src)
    pictures["text_333x500"] = text_like(333, 500)
    pictures["noise_640x479"] = noise(640, 479, 3)
    for key, a in pictures.items():
        name = c.save_npy(f"src_{key}.npy", a)
        for size in (32, 224) if key in ("text_333x500", "noise_640x479") else (16, 21):
            u8, f32 = clip_reference(a, size)
            c.lines.append(f"clip {name} {size} {c.save_npy(f'clip_{key}_{size}_u8.npy', u8)} "
                           f"{c.save_npy(f'clip_{key}_{size}_f32.npy', f32)}")


def make_exif_cases(c, src):
    im = Image.fromarray(text_like(40, 24))  # asymmetric, so every orientation looks different
    for k in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = k
        name = f"exif_{k}.jpg"
        im.save(c.path(name), quality=95, exif=exif.tobytes())
        expected = np.asarray(ImageOps.exif_transpose(Image.open(c.path(name))).convert("RGB"))
        c.lines.append(f"exif {name} {k} {c.save_npy(name + '.npy', expected)}")
    # Big-endian ("MM") TIFF with orientation 6 in a second IFD entry, written by hand.
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=95)
    tiff = b"MM\0\x2a" + struct.pack(">IH", 8, 2)
    tiff += struct.pack(">HHIHH", 0x010F, 2, 4, 0, 0)  # Make: "\0\0\0\0" inline
    tiff += struct.pack(">HHIHH", 0x0112, 3, 1, 6, 0) + struct.pack(">I", 0)
    with open(c.path("exif_be_6.jpg"), "wb") as f:
        f.write(jpeg_with_exif(buf.getvalue(), tiff))
    expected = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB").transpose(Image.Transpose.ROTATE_270))
    c.lines.append(f"exif exif_be_6.jpg 6 {c.save_npy('exif_be_6.jpg.npy', expected)}")
    # An APP1 whose IFD offset points past its end: orientation is ignored, pixels still decode.
    with open(c.path("exif_broken.jpg"), "wb") as f:
        f.write(jpeg_with_exif(buf.getvalue(), b"II\x2a\0" + struct.pack("<I", 4000) + b"\0" * 8))
    expected = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    c.lines.append(f"exif exif_broken.jpg 1 {c.save_npy('exif_broken.jpg.npy', expected)}")


def make_bad_cases(c, src):
    over = "over the limit"
    c.bad("empty.png", b"", "empty")
    c.bad("text.png", b"this is a text file, named .png\n", "unrecognised format")
    ihdr = struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)
    c.bad("huge_header.png", b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr), over)
    c.bad("huge_sides.png", b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 2**32 - 1, 2**32 - 1, 8, 2, 0, 0, 0)),
          "4294967295x4294967295 = 18446744065119617025 pixels, " + over)
    c.bad("huge_header.jpg", b"\xff\xd8\xff\xc0" + struct.pack(">HBHHB", 17, 8, 30000, 30000, 3) +
          bytes([1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]), over)
    c.bad("huge_header.gif", b"GIF89a" + struct.pack("<HHBBB", 30000, 30000, 0, 0, 0), over)
    c.bad("huge_header.bmp", b"BM" + struct.pack("<IHHI", 54, 0, 0, 54) +
          struct.pack("<IiiHHIIiiII", 40, 30000, 30000, 1, 24, 0, 0, 0, 0, 0, 0), over)
    # VP8L header: signature 0x2f, then 14-bit width-1 and height-1 (16384 x 16384).
    vp8l = b"\x2f" + struct.pack("<I", (16383) | (16383 << 14))
    c.bad("huge_header.webp", b"RIFF" + struct.pack("<I", 4 + 8 + len(vp8l) + 1) + b"WEBP" + b"VP8L" +
          struct.pack("<I", len(vp8l)) + vp8l + b"\0", over)
    good = io.BytesIO()
    Image.fromarray(src["noise_50x50"]).save(good, "PNG")
    png = bytearray(good.getvalue())
    png[60] ^= 0xFF  # inside the first IDAT's zlib stream
    c.bad("corrupt_idat.png", bytes(png), "PNG: IDAT")
    c.bad("garbage_after_soi.jpg", b"\xff\xd8\xff" + bytes(range(7, 200)), "JPEG:")
    c.bad("bad_bpp.bmp", b"BM" + struct.pack("<IHHI", 70, 0, 0, 54) +
          struct.pack("<IiiHHIIiiII", 40, 2, 2, 1, 7, 0, 0, 0, 0, 0, 0) + b"\0" * 16, "bits per pixel")
    c.bad("rle.bmp", b"BM" + struct.pack("<IHHI", 70, 0, 0, 54 + 1024) +
          struct.pack("<IiiHHIIiiII", 40, 2, 2, 1, 8, 1, 0, 0, 0, 0, 0) + b"\0" * 1040, "RLE")
    c.bad("no_image.gif", b"GIF89a" + struct.pack("<HHBBB", 4, 4, 0, 0, 0) + b"\x3b", "GIF: the file holds no image")
    c.bad("truncated_palette.gif", b"GIF89a" + struct.pack("<HHBBB", 4, 4, 0xF7, 0, 0) + b"\0" * 30, "GIF: data ends early")
    c.bad("garbage_vp8.webp", b"RIFF" + struct.pack("<I", 28) + b"WEBPVP8 " + struct.pack("<I", 16) + b"\xab" * 16,
          "WebP: corrupt bitstream")


def main():
    warnings.simplefilter("ignore", UserWarning)  # Pillow's advice about palette transparency
    out = sys.argv[1]
    with open(__file__, "rb") as f, open(idefics3_processor.__file__, "rb") as g:
        stamp = hashlib.sha256(f.read() + g.read()).hexdigest()
    stamp_path = os.path.join(out, "stamp")
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
        return
    os.makedirs(out, exist_ok=True)
    c = Cases(out)
    src = sources()
    make_decode_cases(c, src)
    make_resize_cases(c, src)
    make_split_cases(c, src)
    make_clip_cases(c, src)
    make_exif_cases(c, src)
    make_bad_cases(c, src)
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(c.lines) + "\n")
    with open(stamp_path, "w") as f:
        f.write(stamp)
    print(f"make_image_cases: {len(c.lines)} cases in {out}")


if __name__ == "__main__":
    main()
