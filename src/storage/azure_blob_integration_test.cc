// The Blob client against Azurite: the ObjectStore conformance suite, SAS
// (ours and the Azure SDK's), credentials errors, a 64 MiB object in 4 MiB
// blocks, and faults injected by FaultProxy (503 + Retry-After, 429, resets
// mid-upload, timeouts, Azurite dying mid-upload).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "azure_blob.h"
#include "fault_proxy.h"
#include "gantry/storage/object_store.h"
#include "object_store_conformance.h"
#include "testing/azurite_fixture.h"

namespace gantry::storage::testing {
namespace {

std::string FreshContainer() {
  static std::atomic<int> n{0};
  return "c" + std::to_string(::getpid()) + "x" + std::to_string(++n);
}

StoreOptions SmallBlocks(const std::string& container) {
  StoreOptions o;
  o.container = container;
  o.block_bytes = 64 << 10;
  o.parallelism = 4;
  o.retry.initial_backoff = std::chrono::milliseconds(10);
  o.retry.max_backoff = std::chrono::milliseconds(200);
  return o;
}

std::unique_ptr<ObjectStore> MakeAzurite() {
  AzuriteFixture& az = SharedAzurite();
  if (!az.running()) {
    ADD_FAILURE() << "Azurite is not running (see the first failure)";
    return nullptr;
  }
  auto s = OpenObjectStore(az.connection_string(), SmallBlocks(FreshContainer()));
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    return nullptr;
  }
  return std::move(s).value();
}

// Same suite, under a key prefix inside the container.
std::unique_ptr<ObjectStore> MakeAzuritePrefixed() {
  AzuriteFixture& az = SharedAzurite();
  if (!az.running()) return nullptr;
  StoreOptions o = SmallBlocks(FreshContainer());
  o.prefix = "some/prefix";
  auto s = OpenObjectStore(az.connection_string(), o);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    return nullptr;
  }
  return std::move(s).value();
}

INSTANTIATE_TEST_SUITE_P(Azurite, ObjectStoreConformance,
                         ::testing::Values(ConformanceParam{"azurite", MakeAzurite},
                                           ConformanceParam{"azurite_prefixed",
                                                            MakeAzuritePrefixed}),
                         PrintConformanceParam);

std::string RunCommand(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

class AzureBlob : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(SharedAzurite().running()) << "Azurite did not start (see the first failure)";
  }
  AzuriteFixture& az() { return SharedAzurite(); }
  std::unique_ptr<ObjectStore> Open(StoreOptions o, const std::string& endpoint = "") {
    o.endpoint = endpoint;
    auto s = OpenObjectStore(az().connection_string(), o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  ScratchDir scratch_;
};

TEST_F(AzureBlob, AzUrlWithEnvironmentVariables) {
  std::string c = FreshContainer();
  ::setenv("AZURE_STORAGE_KEY", AzuriteFixture::kKey, 1);
  ::setenv("AZURE_STORAGE_BLOB_ENDPOINT", az().endpoint().c_str(), 1);
  auto s = OpenObjectStore("az://devstoreaccount1/" + c + "/runs");
  ::unsetenv("AZURE_STORAGE_KEY");
  ::unsetenv("AZURE_STORAGE_BLOB_ENDPOINT");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->url(), "az://devstoreaccount1/" + c + "/runs");
  ASSERT_TRUE((*s)->Put("x", AsBytes("hi")).ok());
  // Visible without the prefix to a store at the container root.
  StoreOptions o;
  o.container = c;
  auto root = Open(o);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->Get("runs/x").value_or(""), "hi");
}

TEST_F(AzureBlob, WrongKeyIsPermissionDeniedWithoutTheKey) {
  StoreOptions o;
  o.container = FreshContainer();
  std::string wrong =
      "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==";
  o.account_key = wrong;
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  Status s = store->Put("k", AsBytes("v"));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("account key from StoreOptions"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find(wrong), std::string::npos);
  EXPECT_EQ(s.message().find(AzuriteFixture::kKey), std::string::npos);
}

TEST_F(AzureBlob, OurServiceSasWorksAndIsScoped) {
  std::string c = FreshContainer();
  StoreOptions o;
  o.container = c;
  auto owner = Open(o);
  ASSERT_NE(owner, nullptr);
  ASSERT_TRUE(owner->Put("seed", AsBytes("seed")).ok());  // creates the container

  internal::SasParams p;
  p.permissions = "racwdl";
  p.start = "2020-01-01T00:00:00Z";
  p.expiry = "2099-01-01T00:00:00Z";
  p.container = c;
  auto sas = internal::MakeServiceSas(AzuriteFixture::kAccount, AzuriteFixture::kKey, p);
  ASSERT_TRUE(sas.ok());
  StoreOptions so = SmallBlocks(c);
  so.sas_token = "?" + *sas;
  auto store = Open(so);
  ASSERT_NE(store, nullptr);
  std::string big = RandomBytes(300 << 10, 7);
  Status s = store->Put("via-sas", AsBytes(big));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(store->Get("via-sas").value_or("") == big);
  auto list = ListAll(*store, "");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 2u);
  ASSERT_TRUE(store->Delete("via-sas").ok());

  // A read-only SAS cannot write, and the error does not contain the signature.
  p.permissions = "rl";
  auto ro = internal::MakeServiceSas(AzuriteFixture::kAccount, AzuriteFixture::kKey, p);
  ASSERT_TRUE(ro.ok());
  so.sas_token = *ro;
  auto ro_store = Open(so);
  ASSERT_NE(ro_store, nullptr);
  EXPECT_EQ(ro_store->Get("seed").value_or(""), "seed");
  s = ro_store->Put("nope", AsBytes("x"));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_EQ(s.message().find("sig="), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("SAS token from StoreOptions"), std::string::npos) << s.message();
}

// The SAS the Azure SDK generates for the same inputs is byte-identical to
// ours, and it works against Azurite through our client.
TEST_F(AzureBlob, SdkGeneratedSasMatchesOurs) {
  std::string c = FreshContainer();
  StoreOptions o;
  o.container = c;
  auto owner = Open(o);
  ASSERT_NE(owner, nullptr);
  ASSERT_TRUE(owner->Put("obj", AsBytes("payload")).ok());
  std::string js =
      "const s=require('@azure/storage-blob');"
      "const k=new s.StorageSharedKeyCredential('devstoreaccount1','" +
      std::string(AzuriteFixture::kKey) +
      "');"
      "const q=s.generateBlobSASQueryParameters({containerName:'" +
      c +
      "',blobName:'obj',permissions:s.BlobSASPermissions.parse('r'),"
      "startsOn:new Date('2020-01-01T00:00:00Z'),expiresOn:new Date('2099-01-01T00:00:00Z'),"
      "version:'2021-12-02'},k);process.stdout.write(q.toString());";
  std::string cmd = "cd '" GANTRY_SOURCE_DIR "' && node -e \"" + js + "\" 2>&1";
  std::string sdk = RunCommand(cmd);
  ASSERT_NE(sdk.find("sig="), std::string::npos)
      << "node with @azure/storage-blob (node_modules, see package.json) failed: " << sdk;
  auto param = [](const std::string& q, const std::string& name) {
    size_t at = ("&" + q).find("&" + name + "=");
    if (at == std::string::npos) return std::string();
    size_t start = at + name.size() + 1;
    size_t end = q.find('&', start);
    return q.substr(start, end == std::string::npos ? std::string::npos : end - start);
  };
  internal::SasParams p;
  p.permissions = "r";
  p.start = "2020-01-01T00:00:00Z";
  p.expiry = "2099-01-01T00:00:00Z";
  p.container = c;
  p.blob = "obj";
  p.protocol = param(sdk, "spr");  // whatever the SDK chose (usually absent)
  auto ours = internal::MakeServiceSas(AzuriteFixture::kAccount, AzuriteFixture::kKey, p);
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(param(*ours, "sig"), param(sdk, "sig")) << "sdk: " << sdk << "\nours: " << *ours;

  StoreOptions so;
  so.container = c;
  so.sas_token = sdk;
  auto reader = Open(so);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->Get("obj").value_or("?"), "payload");
}

TEST_F(AzureBlob, LargeObjectInFourMiBBlocks) {
  StoreOptions o;
  o.container = FreshContainer();
  o.block_bytes = 4 << 20;
  o.parallelism = 8;
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  std::string data = RandomBytes((64 << 20) + 12345, 42);
  std::string in = scratch_.path() + "/big.in";
  {
    std::ofstream f(in, std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  Status s = store->PutFile("big/file", in);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto info = store->Stat("big/file");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, data.size());
  std::string out = scratch_.path() + "/big.out";
  s = store->GetFile("big/file", out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(ReadWholeFile(out) == data) << "downloaded content differs";
  auto whole = store->Get("big/file");
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(*whole == data);
  std::string mid(5 << 20, '\0');
  ASSERT_TRUE(
      store->GetRange("big/file", (3 << 20) + 1, std::as_writable_bytes(std::span(mid))).ok());
  EXPECT_TRUE(mid == data.substr((3 << 20) + 1, 5 << 20));
}

// --- Faults -----------------------------------------------------------------

class AzureBlobFaults : public AzureBlob {
 protected:
  void SetUp() override {
    AzureBlob::SetUp();
    ASSERT_TRUE(proxy_.Start(az().port()).ok());
    StoreOptions o = SmallBlocks(FreshContainer());
    container_ = o.container;
    o.retry.request_timeout = std::chrono::milliseconds(2000);
    store_ = Open(o, proxy_.endpoint(AzuriteFixture::kAccount));
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->Put("seed", AsBytes("x")).ok());  // the container exists from here on
  }
  static FaultRule Status(std::string match, int skip, int times, int status, int retry_after) {
    FaultRule r;
    r.match = std::move(match);
    r.skip = skip;
    r.times = times;
    r.status = status;
    r.retry_after_s = retry_after;
    return r;
  }
  FaultProxy proxy_;
  std::string container_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_F(AzureBlobFaults, ServiceUnavailableWithRetryAfterThenSuccess) {
  proxy_.AddRule(Status("comp=block&", 1, 2, 503, 1));
  proxy_.AddRule(Status("GET ", 0, 1, 429, 0));
  std::string data = RandomBytes(5 * (64 << 10), 1);
  gantry::Status s = store_->Put("obj", AsBytes(data));
  ASSERT_TRUE(s.ok()) << s.ToString();
  // (That Retry-After sets the wait is unit-tested: object_store_test Retry.*.)
  EXPECT_TRUE(store_->Get("obj").value_or("") == data);
  EXPECT_EQ(proxy_.faults(), 3);
}

TEST_F(AzureBlobFaults, ResetsMidUploadThenSuccess) {
  FaultRule r;
  r.match = "comp=block&";
  r.skip = 2;
  r.times = 3;
  r.action = FaultRule::Action::kReset;
  r.reset_after_bytes = 10000;
  proxy_.AddRule(r);
  FaultRule single = r;
  single.match = "PUT /devstoreaccount1/" + container_ + "/small ";
  single.skip = 0;
  single.times = 1;
  proxy_.AddRule(single);
  std::string data = RandomBytes(6 * (64 << 10) + 5, 2);
  gantry::Status s = store_->Put("obj", AsBytes(data));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(store_->Get("obj").value_or("") == data);
  std::string small = RandomBytes(30000, 3);
  s = store_->Put("small", AsBytes(small));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store_->Get("small").value_or(""), small);
  EXPECT_EQ(proxy_.faults(), 4);
}

TEST_F(AzureBlobFaults, StalledResponseTimesOutAndIsRetried) {
  FaultRule r;
  r.match = "GET ";
  r.times = 1;
  r.action = FaultRule::Action::kDelay;
  r.delay = std::chrono::milliseconds(3000);  // > request_timeout (2 s)
  proxy_.AddRule(r);
  auto got = store_->Get("seed");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "x");
  EXPECT_GE(proxy_.requests_matching("GET "), 2);
}

TEST_F(AzureBlobFaults, RetriesExhaustedIsUnavailableAndNothingIsVisible) {
  proxy_.AddRule(Status("comp=block&", 2, -1, 500, -1));
  std::string data = RandomBytes(8 * (64 << 10), 4);
  gantry::Status s = store_->Put("doomed", AsBytes(data));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("6 attempts"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("HTTP 500"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("doomed"), std::string::npos) << s.message();
  proxy_.ClearRules();
  EXPECT_EQ(store_->Stat("doomed").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(proxy_.requests_matching("comp=blocklist"), 0);
}

TEST_F(AzureBlobFaults, ConnectionsResetFromTheMiddleOnIsUnavailableAndNothingIsVisible) {
  FaultRule r;
  r.skip = 4;  // a few requests get through, then every connection dies mid-request
  r.times = -1;
  r.action = FaultRule::Action::kReset;
  r.reset_after_bytes = 1000;
  proxy_.AddRule(r);
  std::string data = RandomBytes(10 * (64 << 10), 8);
  gantry::Status s = store_->Put("cut", AsBytes(data));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  proxy_.ClearRules();
  EXPECT_EQ(store_->Stat("cut").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Get("seed").value_or(""), "x");
}

TEST_F(AzureBlobFaults, ConditionalCreateRetriedAfterLostResponseStillSucceeds) {
  // The first attempt commits but its answer is lost; the retry gets 409 and
  // must recognise the blob as its own (not AlreadyExists).
  for (const char* key : {"marker", "bigmarker"}) {
    FaultRule r;
    r.match = std::string(key) == "marker" ? "PUT /devstoreaccount1/" + container_ + "/marker "
                                           : "comp=blocklist";
    r.times = 1;
    r.action = FaultRule::Action::kDropResponse;
    proxy_.AddRule(r);
    PutOptions once;
    once.if_none_match = true;
    std::string data = RandomBytes(std::string(key) == "marker" ? 100 : 3 * (64 << 10), 5);
    gantry::Status s = store_->Put(key, AsBytes(data), once);
    ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
    EXPECT_TRUE(store_->Get(key).value_or("") == data);
    // Somebody else's later conditional create still loses.
    s = store_->Put(key, AsBytes("other"), once);
    EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
    proxy_.ClearRules();
  }
  EXPECT_EQ(proxy_.faults(), 2);
}

TEST_F(AzureBlob, AzuriteKilledMidUploadIsUnavailableAndNothingCommits) {
  AzuriteFixture own;
  gantry::Status started = own.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  FaultProxy proxy;
  ASSERT_TRUE(proxy.Start(own.port()).ok());
  FaultRule slow;
  slow.match = "comp=block&";
  slow.times = -1;
  slow.action = FaultRule::Action::kDelay;
  slow.delay = std::chrono::milliseconds(100);
  proxy.AddRule(slow);
  StoreOptions o = SmallBlocks("killed");
  o.parallelism = 2;
  o.retry.max_attempts = 3;
  auto store = Open(o, proxy.endpoint(AzuriteFixture::kAccount));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Put("before", AsBytes("committed earlier")).ok());

  std::string data = RandomBytes(40 * (64 << 10), 6);
  gantry::Status put;
  std::thread writer([&] { put = store->Put("big", AsBytes(data)); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (proxy.requests_matching("comp=block&") < 6 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  own.Stop();  // SIGTERM: Azurite saves its metadata, so what it committed survives
  writer.join();
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  EXPECT_NE(put.message().find("3 attempts"), std::string::npos) << put.message();
  EXPECT_NE(put.message().find("'big'"), std::string::npos) << put.message();
  EXPECT_EQ(proxy.requests_matching("comp=blocklist"), 0);

  // While it is down, reads fail the same way.
  EXPECT_EQ(store->Stat("before").status().code(), StatusCode::kUnavailable);

  gantry::Status restarted = own.Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  proxy.ClearRules();
  EXPECT_EQ(store->Stat("big").status().code(), StatusCode::kNotFound);
  auto all = ListAll(*store, "");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  for (const auto& obj : *all) EXPECT_NE(obj.key, "big");
  EXPECT_EQ(store->Get("before").value_or(""), "committed earlier");
}

TEST_F(AzureBlob, ConcurrentLargeConditionalCreatesHaveOneWinner) {
  StoreOptions o = SmallBlocks(FreshContainer());
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Put("warm", AsBytes("x")).ok());
  std::string a = RandomBytes(6 * (64 << 10), 10), b = RandomBytes(6 * (64 << 10), 11);
  gantry::Status sa, sb;
  PutOptions once;
  once.if_none_match = true;
  std::thread ta([&] { sa = store->Put("commit", AsBytes(a), once); });
  std::thread tb([&] { sb = store->Put("commit", AsBytes(b), once); });
  ta.join();
  tb.join();
  ASSERT_TRUE(sa.ok() != sb.ok()) << sa.ToString() << " / " << sb.ToString();
  gantry::Status lost = sa.ok() ? sb : sa;
  EXPECT_EQ(lost.code(), StatusCode::kAlreadyExists) << lost.ToString();
  // The committed content is exactly the winner's (blocks never mix).
  std::string got = store->Get("commit").value_or("");
  EXPECT_TRUE(got == (sa.ok() ? a : b));
}

}  // namespace
}  // namespace gantry::storage::testing
