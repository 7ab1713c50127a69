// The VLM test model's images (tools/make_generative_models.py, ctest fixture generative_models):
// each reference PNG decodes with our own decoder and normalizes with the folder's
// preprocessor settings (rescale 1/255, mean 0.5, std 0.5) to the pixel_values torch's reference
// fed the vision encoder, so a caption or chat run from the PNG starts from the same input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/npy.h"
#include "image_test_util.h"
#include "modal/image/image.h"
#include "modal/image/normalize.h"

namespace mminfer::image {
namespace {

std::string vlm_path(const std::string& name) {
  return std::string(MMINFER_GENERATIVE_MODELS) + "/vlm-tiny/reference/" + name;
}

TEST(GenerativeVlmImages, PngDecodesToTheReferencePixelValues) {
  // (png, the batch-1 case that starts from it)
  for (const auto& [png, npy] : {std::pair{"image0.png", "b1.pixel_values.npy"},
                                 std::pair{"image1.png", "b1-second.pixel_values.npy"}}) {
    Image image = decode_image(test::read_bytes(vlm_path(png)));
    Tensor want = read_npy(vlm_path(npy));
    ASSERT_EQ(want.shape(), (Shape{1, 3, image.height, image.width})) << png;
    Tensor got = to_chw(image, Normalization{{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}});
    float worst = 0.0f;
    for (int64_t i = 0; i < got.numel(); ++i) {
      worst = std::max(worst, std::fabs(got.data<float>()[i] - want.data<float>()[i]));
    }
    EXPECT_LE(worst, 1e-6f) << png << " against " << npy;
  }
}

}  // namespace
}  // namespace mminfer::image
