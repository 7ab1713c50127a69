"""Synthetic captioning scenes, rendered with numpy: one or two coloured shapes (circle, square,
triangle; six colours; a few sizes, 16 positions) on a dark, lightly noisy background, and a
caption that follows from the scene alone:

    "a red circle"
    "a red circle left of a blue square"   (two shapes side by side: the left one first)
    "a green triangle above a cyan circle" (two shapes one over the other: the upper one first)

The two shapes of a scene always differ in colour or kind, so every caption names one scene."""
import numpy as np

SIZE = 64
CELLS = 4
SHAPES = ("circle", "square", "triangle")
COLOURS = {"red": (220, 40, 40), "green": (40, 190, 60), "blue": (50, 80, 230),
           "yellow": (230, 210, 40), "magenta": (210, 50, 210), "cyan": (50, 210, 220)}
_YY, _XX = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) + 0.5


def _mask(kind, cx, cy, r):
    if kind == "circle":
        return (_XX - cx) ** 2 + (_YY - cy) ** 2 <= r * r
    if kind == "square":
        s = r * 0.85  # about the circle's area
        return (np.abs(_XX - cx) <= s) & (np.abs(_YY - cy) <= s)
    # upward triangle: apex at the top, base at the bottom
    top, bottom = cy - r, cy + r * 0.8
    return (_YY >= top) & (_YY <= bottom) & (np.abs(_XX - cx) <= (_YY - top) * 0.62)


def _thing(rng):
    return str(rng.choice(SHAPES)), str(rng.choice(list(COLOURS)))


def scene(rng):
    """Returns (uint8 image [SIZE, SIZE, 3], caption). Shapes sit in the cells of a 4x4 grid
    (the encoder's 16-pixel patches), jittered by a pixel or two, with sizes from 9 to 14 pixels."""
    base = rng.integers(15, 60)
    img = np.full((SIZE, SIZE, 3), base, np.float32) + rng.normal(0, 6, (SIZE, SIZE, 3))
    things = [_thing(rng)]
    if rng.random() < 0.25:
        cells = [(rng.integers(CELLS), rng.integers(CELLS))]
        caption = f"a {things[0][1]} {things[0][0]}"
    else:
        while True:
            other = _thing(rng)
            if other != things[0]:
                things.append(other)
                break
        # Side by side: the outer columns of a middle row; one over the other: the outer rows of
        # a middle column. The two layouts use different cells, so a shape's cell alone tells the
        # relation (a tiny model learns that in minutes; comparing two positions takes far longer).
        line = 1 + rng.integers(2)
        horizontal = rng.random() < 0.5
        cells = [(0, line), (3, line)] if horizontal else [(line, 0), (line, 3)]  # (column, row)
        word = "left of" if horizontal else "above"
        caption = f"a {things[0][1]} {things[0][0]} {word} a {things[1][1]} {things[1][0]}"
    cell = SIZE / CELLS
    for (kind, colour), (col, row) in zip(things, cells):
        r = rng.uniform(4.5, 7)
        cx, cy = (col + 0.5) * cell + rng.uniform(-1.5, 1.5), (row + 0.5) * cell + rng.uniform(-1.5, 1.5)
        shade = np.array(COLOURS[colour], np.float32) * rng.uniform(0.85, 1.1)
        img[_mask(kind, cx, cy, r)] = shade
    return np.clip(img, 0, 255).astype(np.uint8), caption


def batch(rng, n):
    images, captions = zip(*(scene(rng) for _ in range(n)))
    return np.stack(images), list(captions)


def all_words():
    """Every word a caption can use, for the tokenizer's training text."""
    return ["a", "left", "of", "above", *SHAPES, *COLOURS]
