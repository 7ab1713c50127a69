// Cache-Control and Pragma as RFC 9111 reads them: case-insensitive directives in a list.
#include "serve/cache_control.h"

#include <gtest/gtest.h>

namespace mminfer::serve {
namespace {

CacheDirectives of(std::vector<std::pair<std::string, std::string>> headers) {
  HttpRequest r;
  r.headers = std::move(headers);
  return cache_directives(r);
}

TEST(CacheControl, NoCacheInAnyCaseAndAmongOthers) {
  EXPECT_TRUE(of({{"cache-control", "no-cache"}}).no_cache);
  EXPECT_TRUE(of({{"cache-control", "No-Cache"}}).no_cache);
  EXPECT_TRUE(of({{"cache-control", "max-age=0, NO-CACHE"}}).no_cache);
  EXPECT_TRUE(of({{"cache-control", "max-age=0"}, {"cache-control", " no-cache "}}).no_cache);
  EXPECT_TRUE(of({{"cache-control", "private=\"a, b\", no-cache"}}).no_cache);
  EXPECT_FALSE(of({{"cache-control", "no-store"}}).no_cache);
  EXPECT_FALSE(of({}).no_cache);
}

TEST(CacheControl, LookAlikesAreNotDirectives) {
  EXPECT_FALSE(of({{"cache-control", "no-cache-please"}}).no_cache);
  EXPECT_FALSE(of({{"cache-control", "private=\"no-cache\""}}).no_cache);
  EXPECT_FALSE(of({{"x-cache-control", "no-cache"}}).no_cache);
}

TEST(CacheControl, PragmaNoCacheAndNoStore) {
  EXPECT_TRUE(of({{"pragma", "no-cache"}}).no_cache);
  EXPECT_TRUE(of({{"pragma", "No-Cache"}}).no_cache);
  CacheDirectives d = of({{"cache-control", "No-Store"}});
  EXPECT_TRUE(d.no_store);
  EXPECT_FALSE(d.no_cache);
  EXPECT_TRUE(of({{"cache-control", "no-cache, no-store"}}).no_store);
}

}  // namespace
}  // namespace mminfer::serve
