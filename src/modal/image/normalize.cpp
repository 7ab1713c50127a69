#include "modal/image/normalize.h"

#include <cstring>
#include <string>

#include "mminfer/status.h"

namespace mminfer::image {

Tensor to_chw(const Image& image, const Normalization& norm) {
  for (int c = 0; c < 3; ++c)
    if (!(norm.std[c] != 0.0f)) throw Error("normalize: std[" + std::to_string(c) + "] is zero or NaN");
  // 256 inputs per channel, so a table computed once in double is exact and cheap.
  float table[3][256];
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table[c][v] = static_cast<float>((v / 255.0 - norm.mean[c]) / norm.std[c]);
  const int64_t plane = static_cast<int64_t>(image.width) * image.height;
  Tensor out = Tensor::empty(DType::kFloat32, {3, image.height, image.width});
  float* dst = out.data<float>();
  const uint8_t* src = image.pixels.data();
  for (int64_t i = 0; i < plane; ++i)
    for (int c = 0; c < 3; ++c) dst[c * plane + i] = table[c][src[3 * i + c]];
  return out;
}

Tensor stack_batch(std::span<const Tensor> images) {
  if (images.empty()) throw Error("stack_batch: no images to stack");
  const Tensor& first = images[0];
  for (size_t i = 1; i < images.size(); ++i)
    if (images[i].shape() != first.shape() || images[i].dtype() != first.dtype())
      throw Error("stack_batch: image " + std::to_string(i) + " is " + dtype_name(images[i].dtype()) + " " +
                  shape_str(images[i].shape()) + ", image 0 is " + dtype_name(first.dtype()) + " " +
                  shape_str(first.shape()));
  Shape shape{static_cast<int64_t>(images.size())};
  shape.insert(shape.end(), first.shape().begin(), first.shape().end());
  Tensor out = Tensor::empty(first.dtype(), shape);
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (const Tensor& t : images) {
    std::memcpy(dst, t.raw(), t.nbytes());
    dst += t.nbytes();
  }
  return out;
}

}  // namespace mminfer::image
