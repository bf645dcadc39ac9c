// The ObjectStore conformance suite and file://-specific behaviour.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "gantry/storage/object_store.h"
#include "object_store_conformance.h"

namespace gantry::storage::testing {
namespace {

// One scratch root per process; each store gets its own subdirectory.
std::string FreshDir() {
  static ScratchDir* root = new ScratchDir();  // leaked: outlives every test
  static int n = 0;
  return root->path() + "/store-" + std::to_string(++n);
}

std::unique_ptr<ObjectStore> MakeLocal() {
  StoreOptions o;
  o.block_bytes = 64 << 10;
  auto s = OpenObjectStore("file://" + FreshDir(), o);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    return nullptr;
  }
  return std::move(s).value();
}

INSTANTIATE_TEST_SUITE_P(Local, ObjectStoreConformance,
                         ::testing::Values(ConformanceParam{"local", MakeLocal}),
                         PrintConformanceParam);

TEST(LocalObjectStore, UrlFormsAndLayout) {
  std::string dir = FreshDir();
  auto a = OpenObjectStore(dir);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->url(), "file://" + dir);
  ASSERT_TRUE((*a)->Put("x/y.txt", AsBytes("hello")).ok());
  // One plain file per key: other tools can read the directory.
  EXPECT_EQ(ReadWholeFile(dir + "/x/y.txt"), "hello");
  auto b = OpenObjectStore("file://" + dir + "/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->Get("x/y.txt").value_or(""), "hello");
  // Deleting the last key in a directory removes the directory.
  ASSERT_TRUE((*a)->Delete("x/y.txt").ok());
  struct stat st;
  EXPECT_NE(::stat((dir + "/x").c_str(), &st), 0);
  EXPECT_EQ(::stat(dir.c_str(), &st), 0);
}

TEST(LocalObjectStore, TempFilesAreHiddenAndReserved) {
  std::string dir = FreshDir();
  auto s = OpenObjectStore(dir);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Put("k", AsBytes("v")).ok());
  // A crashed writer's leftover temporary file is not an object.
  { std::ofstream(dir + "/.gantry-tmp-123-crashed") << "partial"; }
  auto all = ListAll(**s, "");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].key, "k");
  EXPECT_EQ((*s)->Put("a/.gantry-tmp-x", AsBytes("v")).code(), StatusCode::kInvalidArgument);
}

TEST(LocalObjectStore, NoCreateWhenAsked) {
  StoreOptions o;
  o.create_container = false;
  auto s = OpenObjectStore(FreshDir() + "/missing", o);
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
}

TEST(LocalObjectStore, KeyThatIsAlsoAPrefix) {
  auto s = OpenObjectStore(FreshDir());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Put("a/b", AsBytes("v")).ok());
  Status st = (*s)->Put("a", AsBytes("v"));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_EQ((*s)->Get("a").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::storage::testing
