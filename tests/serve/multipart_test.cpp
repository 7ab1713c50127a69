// parse_multipart on forms as clients write them (quoted and bare parameters, binary bodies
// holding CR LF and dashes) and on broken ones.
#include "serve/multipart.h"

#include <gtest/gtest.h>

#include "mminfer/status.h"

namespace mminfer::serve {
namespace {

TEST(Multipart, ReadsFieldsAndAFileWithBinaryBytes) {
  const std::string file("RIFF\r\n--not-the-boundary\r\n\0\x01\xff", 29);
  const std::string body = "--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n"
                           "--XyZ\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a \\\"b\\\".wav\"\r\n"
                           "Content-Type: audio/wav\r\n\r\n" + file + "\r\n"
                           "--XyZ\r\nContent-Disposition: form-data; name=language\r\n\r\n\r\n--XyZ--\r\n";
  auto parts = parse_multipart("multipart/form-data; boundary=XyZ", body);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].name, "model");
  EXPECT_EQ(parts[0].body, "whisper");
  EXPECT_FALSE(parts[0].filename);
  EXPECT_EQ(parts[1].name, "file");
  EXPECT_EQ(parts[1].filename.value_or(""), "a \"b\".wav");
  EXPECT_EQ(parts[1].content_type, "audio/wav");
  EXPECT_EQ(std::string(parts[1].body), file);
  EXPECT_EQ(parts[2].name, "language");
  EXPECT_EQ(parts[2].body, "");
  EXPECT_EQ(find_part(parts, "file"), &parts[1]);
  EXPECT_EQ(find_part(parts, "prompt"), nullptr);
  // A quoted boundary, other parameters around it, and a preamble before the first delimiter.
  auto quoted = parse_multipart("Multipart/Form-Data; charset=utf-8; boundary=\"a b\"",
                                "preamble\r\n--a b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--a b--");
  ASSERT_EQ(quoted.size(), 1u);
  EXPECT_EQ(quoted[0].body, "1");
}

TEST(Multipart, RefusesBrokenFormsWithOneLine) {
  const std::string ok_part = "--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n";
  struct Bad {
    std::string type, body, says;
  } bad[] = {
      {"application/json", "{}", "must be multipart/form-data"},
      {"multipart/form-data", ok_part + "--B--", "has no boundary"},
      {"multipart/form-data; boundary=B", "nothing here", "boundary never appears"},
      {"multipart/form-data; boundary=B", ok_part, "ends before its closing boundary"},
      {"multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"f\"\r\nx", "no end to its headers"},
      {"multipart/form-data; boundary=B", "--B\r\nContent-Type: text/plain\r\n\r\nx\r\n--B--", "lacks Content-Disposition"},
      {"multipart/form-data; boundary=B", "--B\r\nContent-Disposition: attachment; name=\"f\"\r\n\r\nx\r\n--B--",
       "lacks Content-Disposition"},
      {"multipart/form-data; boundary=B", "--Bjunk", "boundary line is malformed"},
  };
  for (const Bad& b : bad) {
    try {
      parse_multipart(b.type, b.body);
      ADD_FAILURE() << b.body << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace mminfer::serve
