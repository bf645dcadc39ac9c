// The metadata-store conformance suite (store_suite.h) against a real
// PostgreSQL server started by the test (postgres_fixture.h), plus the
// PostgreSQL-only behaviour: schema versioning and error messages.
#include <atomic>

#include "postgres_fixture.h"
#include "store_suite.h"

namespace gantry::registry::testing {
namespace {

// One server per test process (ctest runs each test in its own process);
// stopped and deleted at exit. A server that cannot start fails every test
// with the reason (e.g. the missing tool), never skips.
Result<PostgresServer*> Server() {
  static Result<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
  if (!server.ok()) return server.status();
  return server->get();
}

Result<std::string> NewDatabase(const std::string&) {
  static std::atomic<int> n{0};
  ASSIGN_OR_RETURN(PostgresServer * server, Server());
  return server->CreateDatabase("suite_" + std::to_string(n++));
}

INSTANTIATE_TEST_SUITE_P(Postgres, StoreSuite,
                         ::testing::Values(StoreBackend{"postgres", &NewDatabase}),
                         [](const ::testing::TestParamInfo<StoreBackend>& p) {
                           return p.param.name;
                         });

// Starts the server or fails the test with the reason.
#define GANTRY_PG_SERVER(var)                                 \
  auto var##_or = Server();                                   \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status().ToString(); \
  PostgresServer& var = **var##_or

TEST(PostgresStore, SchemaIsVersionedAndNewerSchemasAreRefused) {
  GANTRY_PG_SERVER(server);
  auto uri = server.CreateDatabase("schema_check");
  ASSERT_TRUE(uri.ok()) << uri.status().ToString();
  {
    auto s = OpenMetadataStore(*uri);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
  }
  auto have = server.Sql("schema_check",
                         "SELECT value FROM gantry_registry_meta WHERE key = 'schema_version'");
  ASSERT_TRUE(have.ok()) << have.status().ToString();
  EXPECT_EQ(*have, "1");
  ASSERT_TRUE(server
                  .Sql("schema_check",
                       "UPDATE gantry_registry_meta SET value = '99' WHERE key = 'schema_version'")
                  .ok());
  auto s = OpenMetadataStore(*uri);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition) << s.status().ToString();
  EXPECT_NE(s.status().message().find("schema version 99"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("'schema_check'"), std::string::npos) << s.status().message();
}

TEST(PostgresStore, ErrorsNameTheDatabaseButNotThePassword) {
  GANTRY_PG_SERVER(server);
  std::string uri = server.Uri("does_not_exist", "s3cret-pw");
  auto s = OpenMetadataStore(uri);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
  const std::string msg = s.status().message();
  EXPECT_NE(msg.find("'does_not_exist'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("createdb"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("s3cret-pw"), std::string::npos) << msg;
}

TEST(PostgresStore, ConcurrentFirstUseCreatesTheSchemaOnce) {
  GANTRY_PG_SERVER(server);
  auto uri = server.CreateDatabase("first_use");
  ASSERT_TRUE(uri.ok()) << uri.status().ToString();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      auto s = OpenMetadataStore(*uri);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (s.ok()) ok++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 6);
}

}  // namespace
}  // namespace gantry::registry::testing
