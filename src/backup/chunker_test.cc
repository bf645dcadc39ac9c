// The CDC chunker: boundaries depend only on content, sizes stay in bounds,
// and an edit moves only the chunks around it.
#include "gantry/backup/chunker.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "backup_test_util.h"

namespace gantry::backup {
namespace {

std::vector<size_t> Cuts(const Chunker& c, const std::string& data, size_t read_size) {
  // Simulates a reader that delivers `read_size` bytes at a time.
  std::vector<size_t> sizes;
  size_t start = 0, avail = 0;
  while (start < data.size()) {
    while (avail - start < c.params().max_bytes && avail < data.size()) {
      avail = std::min(data.size(), avail + read_size);
    }
    bool at_end = avail == data.size();
    auto span = std::span(reinterpret_cast<const uint8_t*>(data.data()) + start, avail - start);
    size_t cut = c.NextCut(span, at_end);
    EXPECT_GT(cut, 0u);
    sizes.push_back(cut);
    start += cut;
  }
  return sizes;
}

TEST(Chunker, ValidatesParams) {
  EXPECT_TRUE(ValidateChunkerParams({}).ok());
  ChunkerParams p;
  p.avg_bytes = 1000000;
  EXPECT_EQ(ValidateChunkerParams(p).code(), StatusCode::kInvalidArgument);
  p = {};
  p.min_bytes = p.avg_bytes;
  EXPECT_NE(ValidateChunkerParams(p).message().find("min < avg < max"), std::string::npos);
  p = {};
  p.min_bytes = 10;
  EXPECT_FALSE(ValidateChunkerParams(p).ok());
}

TEST(Chunker, SizesWithinBoundsAndIndependentOfReadSize) {
  Chunker c{ChunkerParams{}};
  std::string data = testing::RandomBytes(24u << 20, 1);
  auto a = Cuts(c, data, 64u << 10);
  auto b = Cuts(c, data, 3u << 20);
  EXPECT_EQ(a, b);
  size_t total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    total += a[i];
    if (i + 1 < a.size()) {
      EXPECT_GE(a[i], c.params().min_bytes);
    }
    EXPECT_LE(a[i], c.params().max_bytes);
  }
  EXPECT_EQ(total, data.size());
  // Average near 1 MiB: between 8 and 48 chunks for 24 MiB of random data.
  EXPECT_GE(a.size(), 8u);
  EXPECT_LE(a.size(), 48u);
}

TEST(Chunker, ZerosCutAtMax) {
  Chunker c{ChunkerParams{}};
  std::string zeros(20u << 20, '\0');
  auto sizes = Cuts(c, zeros, 1u << 20);
  // The gear hash of a constant run is constant: either it cuts at min or never.
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    EXPECT_TRUE(sizes[i] == c.params().max_bytes || sizes[i] == c.params().min_bytes + 1)
        << sizes[i];
  }
}

TEST(Chunker, EditInTheMiddleKeepsOtherBoundaries) {
  Chunker c{ChunkerParams{}};
  std::string data = testing::RandomBytes(20u << 20, 2);
  std::string edited = data;
  edited.insert(10u << 20, "an insertion of a few bytes");
  edited[(10u << 20) + 5000] ^= 0x5a;
  auto chunks = [&](const std::string& d) {
    std::set<std::string> s;
    size_t off = 0;
    for (size_t n : Cuts(c, d, 1u << 20)) {
      s.insert(d.substr(off, n));
      off += n;
    }
    return s;
  };
  auto a = chunks(data), b = chunks(edited);
  size_t fresh = 0;
  for (const auto& x : b) fresh += a.count(x) ? 0 : 1;
  EXPECT_LE(fresh, 3u);
  EXPECT_GE(fresh, 1u);
}

TEST(Chunker, DifferentSeedsCutDifferently) {
  ChunkerParams p1, p2;
  p2.seed = 42;
  std::string data = testing::RandomBytes(16u << 20, 3);
  EXPECT_NE(Cuts(Chunker(p1), data, 1u << 20), Cuts(Chunker(p2), data, 1u << 20));
}

}  // namespace
}  // namespace gantry::backup
