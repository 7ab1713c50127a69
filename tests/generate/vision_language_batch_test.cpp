// Conversations made together (VisionLanguage::conversations, the server's image queue) equal
// the ones made one at a time, and the distinct images they hold go through the vision encoder
// once, in one run over all their frames.
#include <gtest/gtest.h>

#include <cmath>

#include "modal/image/image.h"
#include "pipelines/generation/vision_language.h"

namespace mminfer {
namespace {

const std::string kVlm = std::string(MMINFER_GENERATIVE_MODELS) + "/vlm-tiny";

image::Image picture(int width, int height, uint8_t shade) {
  image::Image img = image::Image::blank(width, height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) img.row(y)[x * 3 + c] = static_cast<uint8_t>((shade + 37 * c + x * 3 + y * 5 * (c + 1)) & 0xff);
  return img;
}

nlohmann::ordered_json question(const std::string& text, bool image) {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  if (image) content.push_back({{"type", "image"}});
  content.push_back({{"type", "text"}, {"text", text}});
  return nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
}

TEST(VisionLanguageOnModels, ConversationsTogetherEqualOneAtATime) {
  SessionOptions options;
  options.threads = 2;
  pipelines::VisionLanguage alone(kVlm, options), together(kVlm, options);
  together.features().set_cache_bytes(size_t{16} << 20);
  const image::Image red = picture(120, 90, 10), blue = picture(64, 200, 140);
  const auto q1 = question("What is here?", true), q2 = question("And the colours?", true), q3 = question("Hello", false);
  std::vector<pipelines::VisionLanguage::ChatInput> inputs = {{&q1, &red}, {&q2, &blue}, {&q3, nullptr}, {&q2, &red}};
  auto batch = together.conversations(inputs);
  ASSERT_EQ(batch.size(), inputs.size());
  EXPECT_EQ(together.features().counts().encoded, 2u);  // red once, blue once
  EXPECT_EQ(together.features().counts().reused, 1u);   // red again
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    ASSERT_TRUE(batch[i].error.empty()) << batch[i].error;
    const auto one = alone.conversation(*inputs[i].messages, inputs[i].image);
    const auto& got = batch[i].conversation;
    EXPECT_EQ(got.ids, one.ids);
    EXPECT_EQ(got.image_digest, one.image_digest);
    ASSERT_EQ(got.embeddings.shape(), one.embeddings.shape());
    for (int64_t k = 0; k < one.embeddings.numel(); ++k)
      ASSERT_NEAR(got.embeddings.data<float>()[k], one.embeddings.data<float>()[k], 1e-4f * (1 + std::fabs(one.embeddings.data<float>()[k])))
          << "element " << k;
  }
  EXPECT_NE(batch[0].conversation.image_digest, batch[1].conversation.image_digest);
  EXPECT_EQ(batch[0].conversation.image_digest, batch[3].conversation.image_digest);
}

TEST(VisionLanguageOnModels, AFailingConversationLeavesTheOthers) {
  SessionOptions options;
  options.threads = 2;
  pipelines::VisionLanguage vlm(kVlm, options);
  const image::Image img = picture(50, 50, 90);
  const auto good = question("What is here?", true);
  const auto no_marker = question("an image without its part", false);  // the image has no place in the prompt
  auto made = vlm.conversations({{&good, &img}, {&no_marker, &img}});
  EXPECT_TRUE(made[0].error.empty()) << made[0].error;
  EXPECT_FALSE(made[1].error.empty());
}

}  // namespace
}  // namespace mminfer
