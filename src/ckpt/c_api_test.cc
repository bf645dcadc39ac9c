#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ckpt_test_util.h"
#include "gantry/ckpt.h"

namespace {

using gantry::ckpt::testing::TempDir;

TEST(CApiTest, SaveLatestLoadRoundTrip) {
  TempDir dir;
  gantry_ckpt_manager* m = nullptr;
  ASSERT_EQ(gantry_ckpt_open(dir.path().c_str(), "run", 0, 1, 2, "full", &m), GANTRY_CKPT_OK)
      << gantry_ckpt_last_error();
  float w[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  gantry_ckpt_tensor t = {"w", GANTRY_DTYPE_F32, shape, 2, w, sizeof(w)};
  ASSERT_EQ(gantry_ckpt_save(m, 1, &t, 1, "{\"epoch\": 2}"), GANTRY_CKPT_OK);
  ASSERT_EQ(gantry_ckpt_save_async(m, 2, &t, 1, nullptr), GANTRY_CKPT_OK);
  ASSERT_EQ(gantry_ckpt_wait(m), GANTRY_CKPT_OK);
  int64_t step = -1;
  ASSERT_EQ(gantry_ckpt_latest(m, &step), GANTRY_CKPT_OK);
  EXPECT_EQ(step, 2);

  gantry_ckpt_loaded* l = nullptr;
  const char* names[] = {"w"};
  ASSERT_EQ(gantry_ckpt_load(m, 1, names, 1, &l), GANTRY_CKPT_OK);
  EXPECT_EQ(gantry_ckpt_loaded_step(l), 1);
  ASSERT_EQ(gantry_ckpt_loaded_count(l), 1u);
  gantry_ckpt_tensor out;
  ASSERT_EQ(gantry_ckpt_loaded_tensor(l, 0, &out), GANTRY_CKPT_OK);
  EXPECT_STREQ(out.name, "w");
  EXPECT_EQ(out.dtype, GANTRY_DTYPE_F32);
  ASSERT_EQ(out.ndim, 2u);
  EXPECT_EQ(out.shape[1], 3);
  ASSERT_EQ(out.bytes, sizeof(w));
  EXPECT_EQ(std::memcmp(out.data, w, sizeof(w)), 0);
  EXPECT_STREQ(gantry_ckpt_loaded_metadata(l), "{\"epoch\":2}");
  EXPECT_EQ(gantry_ckpt_loaded_tensor(l, 1, &out), GANTRY_CKPT_INVALID_ARGUMENT);
  gantry_ckpt_loaded_free(l);
  gantry_ckpt_close(m);
}

TEST(CApiTest, ErrorsHaveCodesAndMessages) {
  TempDir dir;
  gantry_ckpt_manager* m = nullptr;
  EXPECT_EQ(gantry_ckpt_open(dir.path().c_str(), "run", 0, 1, 0, "fast", &m),
            GANTRY_CKPT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gantry_ckpt_last_error()).find("'fast'"), std::string::npos);
  ASSERT_EQ(gantry_ckpt_open(dir.path().c_str(), nullptr, 0, 1, 0, nullptr, &m), GANTRY_CKPT_OK);
  int64_t step = 0;
  EXPECT_EQ(gantry_ckpt_latest(m, &step), GANTRY_CKPT_NOT_FOUND);
  float x = 1;
  gantry_ckpt_tensor t = {"x", GANTRY_DTYPE_F64, nullptr, 0, &x, 4};
  EXPECT_EQ(gantry_ckpt_save(m, 1, &t, 1, nullptr), GANTRY_CKPT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gantry_ckpt_last_error()).find("need 8 bytes"), std::string::npos);
  t.dtype = GANTRY_DTYPE_F32;
  EXPECT_EQ(gantry_ckpt_save(m, 1, &t, 1, "[1]"), GANTRY_CKPT_INVALID_ARGUMENT);
  EXPECT_EQ(gantry_ckpt_save(m, 1, &t, 1, "{bad json"), GANTRY_CKPT_INVALID_ARGUMENT);
  ASSERT_EQ(gantry_ckpt_save(m, 1, &t, 1, nullptr), GANTRY_CKPT_OK);
  EXPECT_EQ(gantry_ckpt_save(m, 1, &t, 1, nullptr), GANTRY_CKPT_ALREADY_EXISTS);
  gantry_ckpt_loaded* l = nullptr;
  const char* names[] = {"y"};
  EXPECT_EQ(gantry_ckpt_load(m, -1, names, 1, &l), GANTRY_CKPT_NOT_FOUND);
  EXPECT_EQ(l, nullptr);
  gantry_ckpt_close(m);
}

TEST(CApiTest, NonUtf8NameIsAnErrorCodeNotAnException) {
  TempDir dir;
  gantry_ckpt_manager* m = nullptr;
  ASSERT_EQ(gantry_ckpt_open(dir.path().c_str(), "run", 0, 1, 0, "full", &m), GANTRY_CKPT_OK);
  float w = 1;
  int64_t shape[1] = {1};
  gantry_ckpt_tensor t = {"w\xff", GANTRY_DTYPE_F32, shape, 1, &w, sizeof(w)};
  EXPECT_EQ(gantry_ckpt_save(m, 1, &t, 1, nullptr), GANTRY_CKPT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gantry_ckpt_last_error()).find("UTF-8"), std::string::npos)
      << gantry_ckpt_last_error();
  EXPECT_EQ(gantry_ckpt_save_async(m, 1, &t, 1, nullptr), GANTRY_CKPT_INVALID_ARGUMENT);
  EXPECT_EQ(gantry_ckpt_wait(m), GANTRY_CKPT_OK);
  gantry_ckpt_close(m);
}

}  // namespace

namespace {

TEST(CApiTest, PersistUploadsAndResumes) {
  TempDir dir, store;
  const std::string url = "file://" + store.path();
  gantry_ckpt_manager* m = nullptr;
  ASSERT_EQ(
      gantry_ckpt_open_persist(dir.path().c_str(), "run", 0, 1, 1, nullptr, url.c_str(), 2, &m),
      GANTRY_CKPT_OK)
      << gantry_ckpt_last_error();
  float w[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  gantry_ckpt_tensor t = {"w", GANTRY_DTYPE_F32, shape, 1, w, sizeof(w)};
  ASSERT_EQ(gantry_ckpt_save(m, 5, &t, 1, nullptr), GANTRY_CKPT_OK);
  ASSERT_EQ(gantry_ckpt_wait_uploads(m), GANTRY_CKPT_OK) << gantry_ckpt_last_error();
  gantry_ckpt_close(m);
  ASSERT_TRUE(gantry::storage::LocalFileSystem().RemoveAll(dir.path() + "/run").ok());
  ASSERT_EQ(
      gantry_ckpt_open_persist(dir.path().c_str(), "run", 0, 1, 1, nullptr, url.c_str(), 2, &m),
      GANTRY_CKPT_OK);
  gantry_ckpt_loaded* l = nullptr;
  ASSERT_EQ(gantry_ckpt_load(m, -1, nullptr, 0, &l), GANTRY_CKPT_OK) << gantry_ckpt_last_error();
  EXPECT_EQ(gantry_ckpt_loaded_step(l), 5);
  gantry_ckpt_tensor out;
  ASSERT_EQ(gantry_ckpt_loaded_tensor(l, 0, &out), GANTRY_CKPT_OK);
  EXPECT_EQ(std::memcmp(out.data, w, sizeof(w)), 0);
  gantry_ckpt_loaded_free(l);
  // An unreachable IMDS is not an error when starting the watcher (it keeps polling).
  ASSERT_EQ(gantry_ckpt_on_eviction(
                m, "http://127.0.0.1:1", [](void*, const char*) {}, nullptr),
            GANTRY_CKPT_OK);
  ASSERT_EQ(gantry_ckpt_on_eviction(m, nullptr, nullptr, nullptr), GANTRY_CKPT_OK);
  gantry_ckpt_close(m);
  EXPECT_EQ(gantry_ckpt_wait_uploads(nullptr), GANTRY_CKPT_INVALID_ARGUMENT);
}

}  // namespace
