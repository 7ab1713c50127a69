// The text helpers every flag and form parser shares (core/ascii.h): lists keep their empty
// pieces so a parser can name them, trimming and case leave non-ASCII bytes alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ascii.h"

using mminfer::ascii_lower;
using mminfer::split_list;
using mminfer::trim;
using List = std::vector<std::string>;

namespace {

TEST(Ascii, SplitListKeepsEveryPiece) {
  EXPECT_EQ(split_list("a,b,c"), (List{"a", "b", "c"}));
  EXPECT_EQ(split_list("a,,b,"), (List{"a", "", "b", ""}));
  EXPECT_EQ(split_list(",a"), (List{"", "a"}));
  EXPECT_EQ(split_list(""), (List{""}));
  EXPECT_EQ(split_list(","), (List{"", ""}));
  EXPECT_EQ(split_list(" a , b "), (List{" a ", " b "}));
}

TEST(Ascii, SplitListTakesAnySeparatorAndLeavesUtf8Whole) {
  EXPECT_EQ(split_list("a photo of {}|{}", '|'), (List{"a photo of {}", "{}"}));
  EXPECT_EQ(split_list("chat,\xe7\x8c\xab,\xc3\xa9t\xc3\xa9"), (List{"chat", "\xe7\x8c\xab", "\xc3\xa9t\xc3\xa9"}));
  EXPECT_EQ(split_list(std::string("a\0b,c", 5)), (List{std::string("a\0b", 3), "c"}));
}

TEST(Ascii, TrimAndLower) {
  EXPECT_EQ(trim("  x y \t\r\n"), "x y");
  EXPECT_EQ(trim(" \t "), "");
  EXPECT_EQ(trim("--x--", "-"), "x");
  EXPECT_EQ(ascii_lower("Content-TYPE \xc3\x89"), "content-type \xc3\x89");
}

}  // namespace
