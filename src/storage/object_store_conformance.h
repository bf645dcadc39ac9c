// Test support: the ObjectStore contract as a parameterised GoogleTest suite
// that any backend instantiates with a factory for a fresh, empty store:
//
//   INSTANTIATE_TEST_SUITE_P(Local, ObjectStoreConformance,
//       ::testing::Values(ConformanceParam{"local", [] { return MakeMyStore(); }}));
//
// The factory may return nullptr after recording a gtest failure (e.g. when
// the backend's server could not start). Stores should use small block_bytes
// (e.g. 64 KiB) so that the block/range paths are exercised with small data.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gantry/storage/object_store.h"

// ASSERT that a Status is OK, printing it when not.
#define GANTRY_ASSERT_STATUS_OK(expr)                                     \
  do {                                                                    \
    ::gantry::Status gantry_s_ = (expr);                                  \
    ASSERT_TRUE(gantry_s_.ok()) << #expr << ": " << gantry_s_.ToString(); \
  } while (0)

namespace gantry::storage::testing {

struct ConformanceParam {
  std::string name;
  std::function<std::unique_ptr<ObjectStore>()> make;
  size_t block_bytes = 64 << 10;  // what the factory configured
};

inline std::string PrintConformanceParam(const ::testing::TestParamInfo<ConformanceParam>& p) {
  return p.param.name;
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

inline std::span<const std::byte> AsBytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// A scratch directory removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string t = (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    t += "/gantry-objstore-XXXXXX";
    char* p = ::mkdtemp(t.data());
    if (p != nullptr) path_ = p;
  }
  ~ScratchDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ObjectStoreConformance : public ::testing::TestWithParam<ConformanceParam> {
 protected:
  void SetUp() override {
    store_ = GetParam().make();
    ASSERT_NE(store_, nullptr) << "the store factory for " << GetParam().name << " failed";
  }
  size_t block() const { return GetParam().block_bytes; }
  std::unique_ptr<ObjectStore> store_;
  ScratchDir scratch_;
};

TEST_P(ObjectStoreConformance, PutGetStatDeleteRoundTrip) {
  std::string data = RandomBytes(1000, 1);
  GANTRY_ASSERT_STATUS_OK(store_->Put("a/b/c.bin", AsBytes(data)));
  auto got = store_->Get("a/b/c.bin");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  auto info = store_->Stat("a/b/c.bin");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->key, "a/b/c.bin");
  EXPECT_EQ(info->size, 1000u);
  EXPECT_FALSE(info->etag.empty());
  EXPECT_GT(info->modified_unix, 1'600'000'000);
  GANTRY_ASSERT_STATUS_OK(store_->Delete("a/b/c.bin"));
  EXPECT_EQ(store_->Get("a/b/c.bin").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Stat("a/b/c.bin").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete("a/b/c.bin").code(), StatusCode::kNotFound);
}

TEST_P(ObjectStoreConformance, EmptyObject) {
  GANTRY_ASSERT_STATUS_OK(store_->Put("empty", {}));
  auto got = store_->Get("empty");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "");
  auto info = store_->Stat("empty");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, 0u);
}

TEST_P(ObjectStoreConformance, MissingKeyIsNotFoundAndNamesTheKey) {
  auto got = store_->Get("no/such/key");
  ASSERT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("no/such/key"), std::string::npos)
      << got.status().message();
  std::string buf(4, '\0');
  EXPECT_EQ(store_->GetRange("no/such/key", 0, std::as_writable_bytes(std::span(buf))).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->GetFile("no/such/key", scratch_.path() + "/out").code(), StatusCode::kNotFound);
  EXPECT_NE(access((scratch_.path() + "/out").c_str(), F_OK), 0);
}

TEST_P(ObjectStoreConformance, InvalidKeysAreRefused) {
  for (std::string key :
       {std::string(""), std::string("/abs"), std::string("a//b"), std::string("a/../b"),
        std::string("./a"), std::string("a/"), std::string("a\0b", 3), std::string("..")}) {
    Status s = store_->Put(key, AsBytes("x"));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "key '" << key << "': " << s.ToString();
    EXPECT_EQ(store_->Get(key).status().code(), StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(store_->Stat(key).status().code(), StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(store_->Delete(key).code(), StatusCode::kInvalidArgument) << key;
  }
}

TEST_P(ObjectStoreConformance, OverwriteReplacesAndChangesEtag) {
  GANTRY_ASSERT_STATUS_OK(store_->Put("k", AsBytes("first")));
  auto e1 = store_->Stat("k");
  ASSERT_TRUE(e1.ok());
  GANTRY_ASSERT_STATUS_OK(store_->Put("k", AsBytes("second!")));
  auto e2 = store_->Stat("k");
  ASSERT_TRUE(e2.ok());
  EXPECT_NE(e1->etag, e2->etag);
  EXPECT_EQ(e2->size, 7u);
  EXPECT_EQ(store_->Get("k").value_or(""), "second!");
}

TEST_P(ObjectStoreConformance, ConditionalCreate) {
  PutOptions once;
  once.if_none_match = true;
  GANTRY_ASSERT_STATUS_OK(store_->Put("marker", AsBytes("one"), once));
  Status s = store_->Put("marker", AsBytes("two"), once);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_NE(s.message().find("marker"), std::string::npos) << s.message();
  EXPECT_EQ(store_->Get("marker").value_or(""), "one");
  // Large (block) path too.
  std::string big = RandomBytes(block() * 3 + 17, 2);
  s = store_->Put("marker", AsBytes(big), once);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_EQ(store_->Get("marker").value_or(""), "one");
  GANTRY_ASSERT_STATUS_OK(store_->Put("marker2", AsBytes(big), once));
  EXPECT_EQ(store_->Get("marker2").value_or(""), big);
}

TEST_P(ObjectStoreConformance, ConditionalCreateRaceHasExactlyOneWinner) {
  for (int round = 0; round < 5; ++round) {
    std::string key = "race/" + std::to_string(round);
    std::atomic<int> ok{0}, exists{0}, other{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        PutOptions once;
        once.if_none_match = true;
        std::string body = "writer-" + std::to_string(t);
        Status s = store_->Put(key, AsBytes(body), once);
        if (s.ok()) {
          ++ok;
        } else if (s.code() == StatusCode::kAlreadyExists) {
          ++exists;
        } else {
          ++other;
          ADD_FAILURE() << s.ToString();
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok.load(), 1) << "round " << round;
    EXPECT_EQ(exists.load(), 3) << "round " << round;
    EXPECT_EQ(other.load(), 0);
  }
}

TEST_P(ObjectStoreConformance, LargeObjectRoundTrip) {
  std::string data = RandomBytes(block() * 5 + 123, 3);
  GANTRY_ASSERT_STATUS_OK(store_->Put("big/obj", AsBytes(data)));
  auto got = store_->Get("big/obj");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == data) << "content differs";
  EXPECT_EQ(store_->Stat("big/obj")->size, data.size());
}

TEST_P(ObjectStoreConformance, GetRange) {
  std::string data = RandomBytes(block() * 2 + 500, 4);
  GANTRY_ASSERT_STATUS_OK(store_->Put("r", AsBytes(data)));
  std::string buf(1000, '\0');
  GANTRY_ASSERT_STATUS_OK(
      store_->GetRange("r", block() - 10, std::as_writable_bytes(std::span(buf))));
  EXPECT_EQ(buf, data.substr(block() - 10, 1000));
  std::string tail(500, '\0');
  ASSERT_TRUE(
      store_->GetRange("r", data.size() - 500, std::as_writable_bytes(std::span(tail))).ok());
  EXPECT_EQ(tail, data.substr(data.size() - 500));
  std::string past(10, '\0');
  Status s = store_->GetRange("r", data.size() - 5, std::as_writable_bytes(std::span(past)));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  s = store_->GetRange("r", data.size() + 100, std::as_writable_bytes(std::span(past)));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
}

TEST_P(ObjectStoreConformance, PutFileGetFile) {
  for (size_t n : {size_t{0}, size_t{100}, block() * 4 + 1}) {
    std::string data = RandomBytes(n, 5 + static_cast<uint32_t>(n));
    std::string in = scratch_.path() + "/in-" + std::to_string(n);
    {
      std::ofstream f(in, std::ios::binary);
      f.write(data.data(), static_cast<std::streamsize>(data.size()));
    }
    std::string key = "files/" + std::to_string(n);
    Status s = store_->PutFile(key, in);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(store_->Get(key).value_or("?"), data);
    std::string out = scratch_.path() + "/out-" + std::to_string(n);
    s = store_->GetFile(key, out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(ReadWholeFile(out) == data) << "size " << n;
  }
  // No temporary files are left next to the target.
  int leftovers = 0;
  std::string cmd = "ls -a '" + scratch_.path() + "' | grep -c tmp";
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    if (std::fscanf(p, "%d", &leftovers) != 1) leftovers = 0;
    ::pclose(p);
  }
  EXPECT_EQ(leftovers, 0);
  EXPECT_EQ(store_->PutFile("x", scratch_.path() + "/does-not-exist").code(),
            StatusCode::kNotFound);
}

TEST_P(ObjectStoreConformance, PutStream) {
  for (size_t n : {size_t{0}, size_t{10}, block(), block() * 3 + 7}) {
    std::string data = RandomBytes(n, 9 + static_cast<uint32_t>(n));
    size_t pos = 0;
    // Hands out odd-sized pieces so blocks fill from several reads.
    ReadFn read = [&](std::span<std::byte> buf) -> Result<size_t> {
      size_t k = std::min({buf.size(), data.size() - pos, size_t{1000}});
      std::memcpy(buf.data(), data.data() + pos, k);
      pos += k;
      return k;
    };
    std::string key = "stream/" + std::to_string(n);
    Status s = store_->PutStream(key, read);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(store_->Get(key).value_or("?") == data) << "size " << n;
  }
}

TEST_P(ObjectStoreConformance, FailedStreamLeavesNothing) {
  std::string data = RandomBytes(block() * 3, 11);
  size_t pos = 0;
  ReadFn read = [&](std::span<std::byte> buf) -> Result<size_t> {
    if (pos >= block() * 2) return IoError("reading the source", EIO);
    size_t k = std::min(buf.size(), data.size() - pos);
    std::memcpy(buf.data(), data.data() + pos, k);
    pos += k;
    return k;
  };
  Status s = store_->PutStream("partial", read);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(store_->Stat("partial").status().code(), StatusCode::kNotFound);
  auto all = ListAll(*store_, "");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

TEST_P(ObjectStoreConformance, ListSortedWithPrefixAndPaging) {
  std::vector<std::string> keys = {"p/b", "p/a", "p/c/d", "p/c/e", "q/x", "pz", "p/aa"};
  for (const auto& k : keys) GANTRY_ASSERT_STATUS_OK(store_->Put(k, AsBytes(k)));
  auto all = ListAll(*store_, "");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<std::string> got;
  for (const auto& o : *all) got.push_back(o.key);
  std::vector<std::string> want = keys;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);

  // Prefix "p/" (not "pz").
  auto p = ListAll(*store_, "p/");
  ASSERT_TRUE(p.ok());
  got.clear();
  for (const auto& o : *p) got.push_back(o.key);
  EXPECT_EQ(got, (std::vector<std::string>{"p/a", "p/aa", "p/b", "p/c/d", "p/c/e"}));
  for (const auto& o : *p) EXPECT_EQ(o.size, o.key.size());

  // A prefix that is not a whole segment.
  auto pa = ListAll(*store_, "p/a");
  ASSERT_TRUE(pa.ok());
  EXPECT_EQ(pa->size(), 2u);

  // Pages of two.
  std::vector<std::string> paged;
  std::string next;
  int pages = 0;
  do {
    auto page = store_->List("p", next, 2);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_LE(page->objects.size(), 2u);
    EXPECT_TRUE(std::is_sorted(page->objects.begin(), page->objects.end(),
                               [](auto& a, auto& b) { return a.key < b.key; }));
    for (const auto& o : page->objects) paged.push_back(o.key);
    next = page->next;
    ASSERT_LT(++pages, 10);
  } while (!next.empty());
  EXPECT_EQ(paged, (std::vector<std::string>{"p/a", "p/aa", "p/b", "p/c/d", "p/c/e", "pz"}));

  auto none = store_->List("nothing/");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->objects.empty());
  EXPECT_TRUE(none->next.empty());
}

TEST_P(ObjectStoreConformance, ConcurrentPutsAndGets) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        std::string key = "conc/" + std::to_string(t) + "/" + std::to_string(i);
        std::string data = RandomBytes(100 + t * 10 + i, t * 100 + i);
        if (!store_->Put(key, AsBytes(data)).ok()) ++failures;
        if (store_->Get(key).value_or("") != data) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto all = ListAll(*store_, "conc/");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 40u);
}

}  // namespace gantry::storage::testing
