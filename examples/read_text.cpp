// Reads the text lines of images with an OCR pipeline folder:  read_text DIR IMAGE...
#include <cstdio>
#include <fstream>
#include <iterator>

#include <mminfer/pipelines.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: read_text OCR_DIR IMAGE...\n");
    return 2;
  }
  std::unique_ptr<mminfer::Ocr> ocr;
  if (mminfer::Status s = mminfer::Ocr::open(argv[1], {}, &ocr); !s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  int failures = 0;
  for (int i = 2; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    mminfer::Bytes bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::vector<mminfer::TextLine> lines;
    if (mminfer::Status s = ocr->read(bytes, &lines); !s) {
      std::fprintf(stderr, "%s: %s\n", argv[i], s.message().c_str());
      ++failures;
      continue;
    }
    for (const mminfer::TextLine& line : lines)
      std::printf("%s\t%.3f\t%s\n", argv[i], line.score, line.text.c_str());
  }
  return failures ? 1 : 0;
}
