// The metadata-store conformance suite (store_suite.h) against SQLite.
#include "store_suite.h"

namespace gantry::registry::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Sqlite, StoreSuite,
    ::testing::Values(StoreBackend{
        "sqlite",
        [](const std::string& dir) -> Result<std::string> { return dir + "/registry.sqlite"; }}),
    [](const ::testing::TestParamInfo<StoreBackend>& p) { return p.param.name; });

TEST(OpenMetadataStore, DispatchesOnTheUrlScheme) {
  EXPECT_TRUE(IsPostgresUri("postgresql://u@h/db"));
  EXPECT_TRUE(IsPostgresUri("postgres://h/db"));
  EXPECT_FALSE(IsPostgresUri("/var/lib/gantry/registry.sqlite"));
  EXPECT_FALSE(IsPostgresUri("postgresql.sqlite"));
  // A PostgreSQL URI never falls back to creating a SQLite file of that name.
  auto s = OpenMetadataStore("postgresql://nobody:hunter2@127.0.0.1:1/nodb?connect_timeout=2");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
  EXPECT_NE(s.status().message().find("'nodb'"), std::string::npos) << s.status().message();
  EXPECT_EQ(s.status().message().find("hunter2"), std::string::npos) << s.status().message();
}

TEST(OpenMetadataStore, AMissingDirectoryIsNamedNotCreated) {
  auto s = OpenMetadataStore("/nonexistent-gantry-dir/registry/registry.db");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound) << s.status().ToString();
  EXPECT_NE(
      s.status().message().find("the directory /nonexistent-gantry-dir/registry does not exist"),
      std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace gantry::registry::testing
