// The client conformance suite (client_suite.h) against LocalClient and
// against RemoteClient talking to a real registry server on 127.0.0.1 (with
// an admin API key and the handler pool, as `gantry registry serve` runs).
#include "client_suite.h"
#include "gantry/core/http_server.h"
#include "gantry/registry/http_api.h"
#include "gantry/registry/remote_client.h"
#include "gantry/security/key_store.h"

namespace gantry::registry::testing {
namespace {

std::shared_ptr<Client> OpenLocal(Registry& reg, std::vector<security::DsseVerifier>) {
  // A local client trusts the registry's own keys.
  return std::make_shared<LocalClient>(reg);
}

// The server and what it needs, alive as long as the client.
struct Served {
  std::unique_ptr<security::KeyStore> keys;
  http::Server server;
  std::unique_ptr<RemoteClient> client;
};

std::shared_ptr<Client> OpenRemote(Registry& reg, std::vector<security::DsseVerifier> trusted) {
  auto s = std::make_shared<Served>();
  auto ks = security::KeyStore::Open(":memory:");
  EXPECT_TRUE(ks.ok()) << ks.status().ToString();
  if (!ks.ok()) return nullptr;
  s->keys = *std::move(ks);
  auto admin = s->keys->Create("suite", "admin", 0, 1);
  auto snap = s->keys->Snapshot();
  EXPECT_TRUE(admin.ok() && snap.ok());
  if (!admin.ok() || !snap.ok()) return nullptr;
  HttpApiOptions api;
  api.keys = *snap;
  api.key_store = s->keys.get();
  AddHttpRoutes(reg, api, s->server);
  http::ServerOptions so;
  so.max_body_bytes = kMaxBufferedBodyBytes;
  so.handler_threads = 4;
  Status started = s->server.Start(so);
  EXPECT_TRUE(started.ok()) << started.ToString();
  if (!started.ok()) return nullptr;
  s->client = std::make_unique<RemoteClient>(
      RemoteOptions{.server = "http://127.0.0.1:" + std::to_string(s->server.port()),
                    .credential = admin->second,
                    .trusted = std::move(trusted)});
  RemoteClient* client = s->client.get();
  return std::shared_ptr<Client>(std::move(s), client);
}

INSTANTIATE_TEST_SUITE_P(Clients, ClientSuite,
                         ::testing::Values(ClientBackend{"local", &OpenLocal},
                                           ClientBackend{"remote", &OpenRemote}),
                         [](const ::testing::TestParamInfo<ClientBackend>& p) {
                           return p.param.name;
                         });

}  // namespace
}  // namespace gantry::registry::testing
