#!/usr/bin/python3
"""Writes small media files for the load generator's variant tests into a build-tree folder.

Usage: make_loadgen_inputs.py OUT_DIR

photo.png (RGB), photo_rgba.png (RGBA), photo.jpg (with an EXIF orientation, so its APP1 segment
must keep its place), tone.wav (16-bit mono) and tone_stereo.wav (16-bit stereo, with a LIST
chunk before its data). Pillow (Debian's python3-pil) and the standard wave module; nothing
binary is committed.
"""
import math
import os
import struct
import sys
import wave

from PIL import Image


def gradient(width, height, mode):
    img = Image.new(mode, (width, height))
    for y in range(height):
        for x in range(width):
            px = ((x * 6) % 256, (y * 9) % 256, ((x + y) * 4) % 256)
            img.putpixel((x, y), px + ((x * y) % 256,) if mode == "RGBA" else px)
    return img


def sine(n, rate, freq, amp):
    return [int(amp * math.sin(2 * math.pi * freq * i / rate)) for i in range(n)]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    gradient(41, 29, "RGB").save(os.path.join(out, "photo.png"))
    gradient(17, 13, "RGBA").save(os.path.join(out, "photo_rgba.png"))
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees clockwise to view
    gradient(40, 24, "RGB").save(os.path.join(out, "photo.jpg"), quality=90, exif=exif)

    with wave.open(os.path.join(out, "tone.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(struct.pack("<3200h", *sine(3200, 16000, 440, 12000)))

    # Stereo with a LIST chunk between fmt and data, written by hand.
    left, right = sine(800, 22050, 300, 9000), sine(800, 22050, 500, 7000)
    data = struct.pack("<1600h", *[s for pair in zip(left, right) for s in pair])
    fmt = struct.pack("<HHIIHH", 1, 2, 22050, 22050 * 4, 4, 16)
    info = b"INFOISFT" + struct.pack("<I", 8) + b"mminfer\0"
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt
    chunks += b"LIST" + struct.pack("<I", len(info)) + info
    chunks += b"data" + struct.pack("<I", len(data)) + data
    with open(os.path.join(out, "tone_stereo.wav"), "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks)


if __name__ == "__main__":
    main()
