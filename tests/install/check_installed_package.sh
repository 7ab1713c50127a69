#!/usr/bin/env bash
# Installs the build into a fresh prefix, then builds examples/ against it the two ways users
# do (find_package(mminfer), pkg-config) and runs them: a model through the shared and the
# static library, and the OCR pipeline on a rendered line of text.
#   check_installed_package.sh BUILD_DIR SOURCE_DIR OCR_DIR
set -euo pipefail
build=$1 source=$2 ocr=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name libmminfer.so -print -quit)")
for f in include/mminfer/session.h include/mminfer/pipelines.h; do
  [ -f "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
[ -f "$libdir/libmminfer.a" ] || { echo "FAIL: libmminfer.a not installed"; exit 1; }
# Only the public headers install: no engine internals under include/.
extra=$(find "$prefix/include" -type f ! -path "$prefix/include/mminfer/*")
[ -z "$extra" ] || { echo "FAIL: internal headers installed: $extra"; exit 1; }

# find_package(mminfer): shared and static.
cmake -S "$source/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/examples" -j 2 >/dev/null
# pkg-config: the shared library, found through the installed mminfer.pc.
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046
g++ -O2 "$source/examples/run_model.cpp" -o "$work/run_model_pc" $(pkg-config --cflags --libs mminfer) -Wl,-rpath,"$libdir"

model=$ocr/ch_PP-OCRv4_rec_infer.onnx
"$work/examples/run_model" "$model" x=1x3x48x320 --threads 1 >"$work/shared.txt"
"$work/examples/run_model_static" "$model" x=1x3x48x320 --threads 1 >"$work/static.txt"
"$work/run_model_pc" "$model" x=1x3x48x320 --threads 1 >"$work/pc.txt"
cat "$work/shared.txt"
grep -q "^output .* 1x40x6625 sum" "$work/shared.txt" || { echo "FAIL: unexpected output of run_model"; exit 1; }
cmp "$work/shared.txt" "$work/static.txt" || { echo "FAIL: the static build printed something else"; exit 1; }
cmp "$work/shared.txt" "$work/pc.txt" || { echo "FAIL: the pkg-config build printed something else"; exit 1; }
# The static program carries the engine: it must not load libmminfer.so.
if ldd "$work/examples/run_model_static" | grep -q libmminfer; then echo "FAIL: run_model_static loads libmminfer.so"; exit 1; fi

/usr/bin/python3 - "$work/line.png" <<'PY'
import sys
from PIL import Image, ImageDraw, ImageFont
font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 40)
img = Image.new("RGB", (520, 90), "white")
ImageDraw.Draw(img).text((20, 20), "Installed 2026", font=font, fill="black")
img.save(sys.argv[1])
PY
"$work/examples/read_text" "$ocr" "$work/line.png" | tee "$work/lines.txt"
grep -q "Installed 2026" "$work/lines.txt" || { echo "FAIL: read_text did not read the line"; exit 1; }
if "$work/examples/read_text" "$ocr" /dev/null 2>"$work/err.txt"; then echo "FAIL: an empty file was read"; exit 1; fi
cat "$work/err.txt"
echo "installed package: find_package shared and static, pkg-config, OCR example: all passed"
