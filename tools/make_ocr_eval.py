#!/usr/bin/python3
"""Writes a synthetic OCR evaluation set: rendered text images and their ground truth.

  make_ocr_eval.py OUT_DIR [--per-subset N] [--seed S]

Seven subsets of N images each (default 30): clean-en, clean-zh, digits (dates, prices, times,
codes), and rotated (±3°), blur, noise, jpeg (quality 30-60), whose text is drawn from the first
three. Each image holds one line or a short paragraph of 2-4 lines, 16-48 px, in DejaVu
Sans/Serif/Mono, Liberation Sans/Serif or Noto Sans CJK SC. OUT_DIR/ground_truth.json lists,
per image: file (relative to OUT_DIR), subset, lines (text in reading order), font, size.

Rendering uses Pillow rather than ImageMagick: the fonts are loaded by path, so the output
depends only on the seed, Pillow and the Debian font packages. Every character used is in
PP-OCRv4's dictionary (ppocr_keys_v1.txt) or is a space.
"""
import argparse
import json
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONTS = {
    "DejaVu Sans": ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 0),
    "DejaVu Serif": ("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", 0),
    "DejaVu Sans Mono": ("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", 0),
    "Liberation Sans": ("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf", 0),
    "Liberation Serif": ("/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf", 0),
    "Noto Sans CJK SC": ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 2),
}
LATIN_FONTS = [f for f in FONTS if not f.startswith("Noto")]

ENGLISH = [
    "The morning train leaves at a quarter past seven.",
    "Please keep your ticket until the end of the journey.",
    "She painted the fence blue, then changed her mind.",
    "Fresh bread is sold here every day except Sunday.",
    "Turn left at the bakery; the library is on the right.",
    "Our meeting moved to Thursday (room B, second floor).",
    "Do not open this door while the alarm is active!",
    "Why does the kettle always boil when you leave?",
    "Water the plants twice a week, or more in summer.",
    "The river was calm, and the boats drifted slowly.",
    "Keep calm and check the fuse box first.",
    "A quick brown fox jumped over the sleeping dog.",
    "Results may vary; read the label before use.",
    "He said: \"Bring a coat, it will rain later.\"",
    "Mix flour, sugar and eggs in a large bowl.",
    "The museum is closed for repairs until spring.",
    "Lights out at ten, breakfast served at eight.",
    "Every answer leads to a slightly better question.",
    "Store in a cool, dry place away from sunlight.",
    "The cat's bowl was empty again - who ate it?",
    "Wear gloves when handling the metal parts.",
    "Small steps, taken daily, cover long distances.",
    "Send the report by Friday, not later.",
    "This lane is reserved for buses and bicycles.",
    "Thank you for waiting; your order is ready.",
    "The garden path winds past an old stone wall.",
    "Press the red button twice to reset the device.",
    "Is this seat taken, or may I sit here?",
    "Winter evenings are long, quiet and dark.",
    "Check the spelling of names: Anna, Omar, Yuki.",
    "Birds gather on the roof before the storm.",
    "Sign here, date here, and initial each page.",
]

CHINESE = [
    "今天天气很好，我们去公园散步。",
    "请在下一站下车，注意脚下安全。",
    "这家书店的咖啡非常好喝。",
    "会议改到星期四下午三点。",
    "他每天早上六点起床跑步。",
    "图书馆周一至周五开放。",
    "请把窗户关上，外面下雨了。",
    "我们明天一起去看电影吧！",
    "这条河的水很清，可以看到小鱼。",
    "你知道最近的地铁站在哪里吗？",
    "妈妈做的饺子最好吃。",
    "学习新语言需要耐心和时间。",
    "请保持安静，孩子正在睡觉。",
    "春天来了，花园里开满了花。",
    "火车晚点了二十分钟。",
    "这本书讲的是一个古老的故事。",
    "晚饭后我们在湖边聊天。",
    "请勿在此处停车。",
    "他说：“明天见。”",
    "山上的空气比城里新鲜。",
    "超市就在银行的对面。",
    "天黑以前一定要回家。",
    "电脑需要重新启动才能更新。",
    "小猫在阳光下睡着了。",
    "这个问题比我想的更难。",
    "周末的市场人很多，东西也便宜。",
    "请按照说明书安装设备。",
    "桌子上有三本书和一支笔。",
    "秋天的叶子变成了红色和黄色。",
    "欢迎来到我们的城市！",
    "飞机将在十分钟后起飞。",
    "多喝水，少熬夜，身体才会好。",
]

SUBSETS = ["clean-en", "clean-zh", "digits", "rotated", "blur", "noise", "jpeg"]


def digits_line(rng):
    """One line of 2-3 numeric items: dates, prices, times, percentages, codes."""
    def item():
        y, m, d = rng.integers(1990, 2031), rng.integers(1, 13), rng.integers(1, 29)
        kind = rng.integers(0, 8)
        if kind == 0:
            return f"{y}-{m:02d}-{d:02d}"
        if kind == 1:
            return f"{d:02d}/{m:02d}/{y}"
        if kind == 2:
            return f"${rng.integers(1, 5000):,}.{rng.integers(0, 100):02d}"
        if kind == 3:
            return f"¥{rng.integers(1, 999)}.{rng.integers(0, 100):02d}"
        if kind == 4:
            return f"{rng.integers(0, 24):02d}:{rng.integers(0, 60):02d}"
        if kind == 5:
            return f"{rng.integers(0, 100)}.{rng.integers(0, 10)}%"
        if kind == 6:
            return f"No.{rng.integers(1000, 9999)}-{rng.integers(100, 999)}"
        return f"+{rng.integers(1, 90)} {rng.integers(100, 999)}-{rng.integers(1000, 9999)}"
    return " ".join(item() for _ in range(int(rng.integers(2, 4))))


def content(kind, rng):
    """Lines and a font for one image of kind en, zh or digits: a line or a 2-4 line paragraph."""
    n = 1 if rng.random() < 0.5 else int(rng.integers(2, 5))
    if kind == "digits":
        return [digits_line(rng) for _ in range(n)], str(rng.choice(list(FONTS)))
    pool, fonts = (ENGLISH, LATIN_FONTS) if kind == "en" else (CHINESE, ["Noto Sans CJK SC"])
    picks = rng.choice(len(pool), size=n, replace=False)
    return [pool[i] for i in picks], str(rng.choice(fonts))


def render(lines, font_name, size, rng):
    """Dark text on a light page with a margin; line pitch 1.5-1.8 times the size."""
    path, index = FONTS[font_name]
    font = ImageFont.truetype(path, size, index=index)
    pitch = int(size * rng.uniform(1.5, 1.8))
    margin = int(size * rng.uniform(0.8, 1.5))
    width = max(int(font.getlength(t)) for t in lines) + 2 * margin
    height = pitch * (len(lines) - 1) + size + 2 * margin
    paper = tuple(int(v) for v in rng.integers(225, 256, 3))
    ink = tuple(int(v) for v in rng.integers(0, 60, 3))
    img = Image.new("RGB", (width, height), paper)
    draw = ImageDraw.Draw(img)
    for i, text in enumerate(lines):
        draw.text((margin, margin + i * pitch), text, font=font, fill=ink)
    return img, paper


def degrade(img, subset, size, paper, rng):
    """Applies the subset's distortion; returns (image, file extension, save options)."""
    if subset == "rotated":
        angle = rng.uniform(1.0, 3.0) * rng.choice([-1, 1])
        return img.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=paper), "png", {}
    if subset == "blur":
        return img.filter(ImageFilter.GaussianBlur(size * rng.uniform(0.03, 0.06))), "png", {}
    if subset == "noise":
        noisy = np.asarray(img, np.float32) + rng.normal(0, rng.uniform(12, 28), (img.height, img.width, 1))
        return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)), "png", {}
    if subset == "jpeg":
        return img, "jpg", {"quality": int(rng.integers(30, 61))}
    return img, "png", {}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--per-subset", type=int, default=30)
    p.add_argument("--seed", type=int, default=7100,
                   help="first of the per-subset seeds; another seed renders another set (to tune on one, score on another)")
    args = p.parse_args()
    missing = [path for path, _ in FONTS.values() if not os.path.exists(path)]
    if missing:
        raise SystemExit(f"make_ocr_eval: missing fonts {missing} (run scripts/bootstrap)")

    records = []
    for s, subset in enumerate(SUBSETS):
        rng = np.random.default_rng(args.seed + s)  # one stream per subset: sizes change nothing else
        os.makedirs(os.path.join(args.out_dir, subset), exist_ok=True)
        for i in range(args.per_subset):
            kind = {"clean-en": "en", "clean-zh": "zh", "digits": "digits"}.get(subset)
            kind = kind or ["en", "zh", "digits"][i % 3]
            lines, font_name = content(kind, rng)
            size = int(rng.integers(16, 49))
            img, paper = render(lines, font_name, size, rng)
            img, ext, save_options = degrade(img, subset, size, paper, rng)
            rel = f"{subset}/{i:03d}.{ext}"
            img.save(os.path.join(args.out_dir, rel), **save_options)
            records.append({"file": rel, "subset": subset, "lines": lines, "font": font_name, "size": size})

    with open(os.path.join(args.out_dir, "ground_truth.json"), "w", encoding="utf-8") as f:
        json.dump({"images": records}, f, ensure_ascii=False, indent=1)
    print(f"wrote {len(records)} images ({args.per_subset} per subset: {', '.join(SUBSETS)}) to {args.out_dir}")


if __name__ == "__main__":
    main()
