// Regression tests for fuzz_backup_manifest findings: numeric fields holding
// JSON floats (out of an integer's range) must be refused as mistyped, never
// cast (undefined behaviour).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "gantry/backup/backup.h"
#include "gantry/backup/repository.h"
#include "gantry/core/json.h"

namespace gantry::backup {
namespace {

using ::testing::HasSubstr;

constexpr const char* kManifest = R"({"format":"gantry-backup-manifest","version":1,
  "id":"0123456789abcdef","name":"data","time":"2026-11-30T08:00:00Z","time_unix":1796025600,
  "hostname":"h","tags":{"k":"v"},"sources":["/data"],"stats":{"files":1,"dirs":1,"bytes":5},
  "entries":[{"path":"data","type":"dir","mode":493,"mtime_ns":1},
   {"path":"data/a","type":"file","mode":420,"mtime_ns":2,"size":5,"chunks":[
    ["2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",5]]}]})";

constexpr const char* kConfig = R"({"format":"gantry-backup","version":1,"id":"abcd",
  "chunker":{"algorithm":"gear-fastcdc","min_bytes":65536,"avg_bytes":262144,
             "max_bytes":1048576,"seed":"0011223344556677"},
  "compression":{"algorithm":"zstd","level":3},"encryption":null})";

Json Parse(const std::string& text) {
  auto j = ParseJson(text, "test.json");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : Json();
}

// Replaces the first `from` in `text` with `to`.
std::string With(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(ManifestFromJson, AcceptsIntegers) {
  auto m = Manifest::FromJson(Parse(kManifest), "backups/m.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->stats.bytes, 5u);
  ASSERT_EQ(m->entries.size(), 2u);
  EXPECT_EQ(m->entries[1].chunks[0].size, 5u);
}

TEST(ManifestFromJson, RefusesFloatsInIntegerFields) {
  for (const auto& [from, to] : std::initializer_list<std::pair<const char*, const char*>>{
           {"\"version\":1", "\"version\":1e300"},
           {"\"time_unix\":1796025600", "\"time_unix\":1e30"},
           {"\"bytes\":5", "\"bytes\":1e26"},
           {"\"mode\":420", "\"mode\":-1e20"},
           {"\"mtime_ns\":2", "\"mtime_ns\":9e99"},
           {"\"size\":5", "\"size\":5.0"},
           {"b9824\",5]", "b9824\",1e26]"}}) {
    auto m = Manifest::FromJson(Parse(With(kManifest, from, to)), "backups/m.json");
    ASSERT_FALSE(m.ok()) << to;
    EXPECT_EQ(m.status().code(), StatusCode::kDataLoss) << to;
    EXPECT_THAT(m.status().message(), HasSubstr("backups/m.json")) << to;
    EXPECT_THAT(m.status().message(), HasSubstr("must be an integer")) << to;
  }
}

TEST(RepoConfigFromJson, RefusesFloatsInIntegerFields) {
  ASSERT_TRUE(RepoConfig::FromJson(Parse(kConfig), "config.json").ok());
  for (const auto& [from, to] : std::initializer_list<std::pair<const char*, const char*>>{
           {"\"version\":1", "\"version\":1e300"},
           {"\"max_bytes\":1048576", "\"max_bytes\":104001122334455677788998576"},
           {"\"min_bytes\":65536", "\"min_bytes\":-1e40"},
           {"\"level\":3", "\"level\":3e10"}}) {
    auto c = RepoConfig::FromJson(Parse(With(kConfig, from, to)), "config.json");
    ASSERT_FALSE(c.ok()) << to;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << to;
    EXPECT_THAT(c.status().message(), HasSubstr("must be an integer")) << to;
  }
}

}  // namespace
}  // namespace gantry::backup
