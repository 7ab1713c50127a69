// jinja_render TEMPLATE CONTEXT.json : prints the template rendered with the context (no newline
// added), or the error in one line on stderr with exit status 1. check_chat_templates.py compares
// it with python3-jinja2.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "generate/jinja_template.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fputs("usage: jinja_render TEMPLATE CONTEXT.json\n", stderr);
    return 2;
  }
  try {
    std::stringstream source, context;
    source << std::ifstream(argv[1], std::ios::binary).rdbuf();
    context << std::ifstream(argv[2], std::ios::binary).rdbuf();
    std::string out = mminfer::generate::jinja::Template(source.str()).render(nlohmann::ordered_json::parse(context.str()));
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
