// Unit tests without a server: key rules, URL and connection-string parsing,
// SharedKey / SAS signing against known answers, the List Blobs XML parser.
#include "gantry/storage/object_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "azure_blob.h"

namespace gantry::storage {
namespace {

using internal::AzureConfig;
constexpr const char* kDevKey =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

// Clears the Azure variables for the test and restores nothing (tests set what they need).
class EnvGuard {
 public:
  EnvGuard() {
    for (const char* v : kVars) ::unsetenv(v);
  }
  ~EnvGuard() {
    for (const char* v : kVars) ::unsetenv(v);
  }

 private:
  static constexpr const char* kVars[] = {"AZURE_STORAGE_CONNECTION_STRING",
                                          "AZURE_STORAGE_KEY",
                                          "AZURE_STORAGE_SAS_TOKEN",
                                          "AZURE_STORAGE_BLOB_ENDPOINT",
                                          "GANTRY_STORAGE_AUTH",
                                          "GANTRY_CA_FILE",
                                          "SSL_CERT_FILE"};
};

TEST(ValidateKey, AcceptsAndRefuses) {
  for (const char* ok :
       {"a", "a/b", "run1/step-0000000010/manifest.json", ".hidden", "a/.b/c", "x..y", "sp ace"}) {
    EXPECT_TRUE(internal::ValidateKey(ok).ok()) << ok;
  }
  for (std::string bad : {std::string(""), std::string("/a"), std::string("a//b"),
                          std::string("a/"), std::string("."), std::string(".."),
                          std::string("a/./b"), std::string("a/../b"), std::string("a\0b", 3)}) {
    Status s = internal::ValidateKey(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(internal::ValidateKey("a//b").message().find("'a//b'"), std::string::npos);
}

TEST(OpenObjectStore, SchemesAndErrors) {
  EnvGuard env;
  EXPECT_EQ(OpenObjectStore("s3://bucket/x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenObjectStore("relative/dir").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenObjectStore("file://relative").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenObjectStore("az://acct").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenObjectStore("az://acct/c?conn=X").status().code(), StatusCode::kInvalidArgument);
  ::setenv("AZURE_STORAGE_KEY", kDevKey, 1);
  for (const char* bad : {"az://acct/ab", "az://acct/Upper", "az://acct/a--b", "az://acct/-ab"}) {
    Status cs = OpenObjectStore(bad).status();
    EXPECT_EQ(cs.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(cs.message().find("container name"), std::string::npos) << cs.message();
  }
  ::unsetenv("AZURE_STORAGE_KEY");
  // Without a key or SAS the store uses Entra ID (nothing is fetched yet) ...
  EXPECT_TRUE(OpenObjectStore("az://acct/ckpts/p").ok());
  // ... unless told not to.
  StoreOptions keys;
  keys.auth = BlobAuth::kKeyOrSas;
  Status s = OpenObjectStore("az://acct/ckpts/p", keys).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("AZURE_STORAGE_KEY"), std::string::npos) << s.message();
  ::setenv("GANTRY_STORAGE_AUTH", "key", 1);
  EXPECT_EQ(OpenObjectStore("az://acct/ckpts/p").status().code(), StatusCode::kFailedPrecondition);
  ::setenv("GANTRY_STORAGE_AUTH", "kerberos", 1);
  s = OpenObjectStore("az://acct/ckpts/p").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("GANTRY_STORAGE_AUTH='kerberos'"), std::string::npos) << s.message();
}

// A token source that counts its calls and hands out a fixed token.
class CountingTokenSource : public security::TokenSource {
 public:
  Result<std::string> Token() override {
    ++calls;
    return std::string("tok");
  }
  std::string Describe() const override { return "test identity"; }
  int calls = 0;
};

TEST(OpenObjectStore, EntraIdSelection) {
  EnvGuard env;
  auto source = std::make_shared<CountingTokenSource>();
  StoreOptions o;
  o.token_source = source;
  // A key in the environment wins under kAuto; kEntraId (or GANTRY_STORAGE_AUTH) overrides it.
  ::setenv("AZURE_STORAGE_KEY", kDevKey, 1);
  AzureConfig c;
  c.account = "acct";
  c.endpoint = "https://acct.blob.core.windows.net";
  c.account_key = kDevKey;
  ASSERT_TRUE(internal::ResolveAuth(o, "test store", &c).ok());
  EXPECT_EQ(c.token_source, nullptr);
  EXPECT_EQ(c.account_key, kDevKey);
  o.auth = BlobAuth::kEntraId;
  ASSERT_TRUE(internal::ResolveAuth(o, "test store", &c).ok());
  EXPECT_EQ(c.token_source, source);
  EXPECT_TRUE(c.account_key.empty()) << "a key must never travel next to a token";
  EXPECT_EQ(c.credential_source, "Entra ID token from test identity");
  EXPECT_EQ(source->calls, 0) << "no token before the first request";
  ::unsetenv("AZURE_STORAGE_KEY");
  o.auth = BlobAuth::kAuto;
  ::setenv("GANTRY_STORAGE_AUTH", "entra-id", 1);
  AzureConfig k;
  k.endpoint = "https://acct.blob.core.windows.net";
  k.sas_token = "sv=x&sig=y";
  ASSERT_TRUE(internal::ResolveAuth(o, "test store", &k).ok());
  EXPECT_TRUE(k.sas_token.empty());
  EXPECT_EQ(k.token_source, source);
  ::unsetenv("GANTRY_STORAGE_AUTH");
  // Bearer tokens never go over plain http.
  ::setenv("AZURE_STORAGE_BLOB_ENDPOINT", "http://127.0.0.1:10000/acct", 1);
  Status s = OpenObjectStore("az://acct/ckpts", o).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("only sent over https"), std::string::npos) << s.message();
  ::unsetenv("AZURE_STORAGE_BLOB_ENDPOINT");
  // A connection string without AccountKey or SAS uses Entra ID too.
  StoreOptions oc = o;
  oc.container = "ckpts";
  auto cs = OpenObjectStore("DefaultEndpointsProtocol=https;AccountName=acct;", oc);
  ASSERT_TRUE(cs.ok()) << cs.status().ToString();
  // The CA file comes from the options, else GANTRY_CA_FILE, else SSL_CERT_FILE; a missing one
  // is named.
  ::setenv("SSL_CERT_FILE", "/nonexistent/ssl.pem", 1);
  ::setenv("GANTRY_CA_FILE", "/nonexistent/gantry.pem", 1);
  s = OpenObjectStore("az://acct/ckpts", o).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/gantry.pem"), std::string::npos) << s.message();
  o.ca_file = "/nonexistent/opt.pem";
  s = OpenObjectStore("az://acct/ckpts", o).status();
  EXPECT_NE(s.message().find("/nonexistent/opt.pem"), std::string::npos) << s.message();
  // The credential is checked when the store is opened (an empty resource means storage).
  StoreOptions bad;
  bad.credential.kind = security::AzureIdentity::kServicePrincipal;  // without ids
  ::unsetenv("SSL_CERT_FILE");
  ::unsetenv("GANTRY_CA_FILE");
  s = OpenObjectStore("az://acct/ckpts", bad).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

TEST(OpenObjectStore, AzUrlWithEnvironment) {
  EnvGuard env;
  ::setenv("AZURE_STORAGE_KEY", kDevKey, 1);
  auto s = OpenObjectStore("az://myacct/ckpts/run1/");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->url(), "az://myacct/ckpts/run1");
  ::unsetenv("AZURE_STORAGE_KEY");
  ::setenv("AZURE_STORAGE_SAS_TOKEN", "?sv=2021-12-02&sig=abc", 1);
  s = OpenObjectStore("az://myacct/ckpts");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->url(), "az://myacct/ckpts");
  // A connection string for another account is refused.
  ::setenv("AZURE_STORAGE_CONNECTION_STRING",
           (std::string("AccountName=other;AccountKey=") + kDevKey).c_str(), 1);
  EXPECT_EQ(OpenObjectStore("az://myacct/ckpts").status().code(), StatusCode::kInvalidArgument);
  // A key that is not base64 is refused without echoing it.
  EnvGuard clear;
  ::setenv("AZURE_STORAGE_KEY", "not*base64!", 1);
  Status bad = OpenObjectStore("az://myacct/ckpts").status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message().find("not*base64!"), std::string::npos);
}

TEST(ConnectionString, Forms) {
  auto dev = internal::ParseConnectionString("UseDevelopmentStorage=true");
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(dev->account, "devstoreaccount1");
  EXPECT_EQ(dev->endpoint, "http://127.0.0.1:10000/devstoreaccount1");
  EXPECT_EQ(dev->account_key, kDevKey);

  auto full = internal::ParseConnectionString(
      std::string("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=") + kDevKey +
      ";EndpointSuffix=core.windows.net");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->account, "acct");
  EXPECT_EQ(full->endpoint, "https://acct.blob.core.windows.net");
  EXPECT_EQ(full->account_key, kDevKey);  // the '=' padding survives

  auto azurite = internal::ParseConnectionString(
      std::string("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=") +
      kDevKey + ";BlobEndpoint=http://127.0.0.1:12345/devstoreaccount1/;");
  ASSERT_TRUE(azurite.ok());
  EXPECT_EQ(azurite->endpoint, "http://127.0.0.1:12345/devstoreaccount1");

  auto sas = internal::ParseConnectionString(
      "BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2021&sig=x%3D");
  ASSERT_TRUE(sas.ok());
  EXPECT_EQ(sas->account, "acct");
  EXPECT_EQ(sas->sas_token, "sv=2021&sig=x%3D");

  Status s = internal::ParseConnectionString("AccountKey=secretvalue;junk").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().find("secretvalue"), std::string::npos);

  EnvGuard env;
  EXPECT_TRUE(IsRemoteUrl("UseDevelopmentStorage=true"));
  EXPECT_TRUE(IsRemoteUrl("az://a/b"));
  EXPECT_FALSE(IsRemoteUrl("/tmp/x"));
  EXPECT_FALSE(IsRemoteUrl("file:///tmp/x"));
  // A connection string needs StoreOptions::container.
  EXPECT_EQ(OpenObjectStore("UseDevelopmentStorage=true").status().code(),
            StatusCode::kInvalidArgument);
  StoreOptions o;
  o.container = "ckpts";
  o.prefix = "/run1/";
  auto st = OpenObjectStore("UseDevelopmentStorage=true", o);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ((*st)->url(), "az://devstoreaccount1/ckpts/run1");
}

// The StringToSign below was written out by hand from the SharedKey rules
// (12 standard header lines, Content-Length as given, x-ms-* sorted and
// lower-cased, then /account + path and the query parameters sorted); the
// signature was computed independently with Python's hmac module.
TEST(SharedKey, KnownAnswer) {
  internal::SignInput in;
  in.verb = "PUT";
  in.content_length = "11";
  in.content_md5 = "XrY7u+Ae7tCTyyK7j1rNww==";
  in.content_type = "application/octet-stream";
  in.if_none_match = "*";
  in.ms_headers = {{"x-ms-version", "2021-12-02"},
                   {"X-MS-Date", "Mon, 30 Nov 2026 06:42:02 GMT"},
                   {"x-ms-blob-type", "BlockBlob"}};
  in.account = "devstoreaccount1";
  in.path = "/devstoreaccount1/ckpts/run1/a.bin";
  in.query = {{"comp", "block"}, {"blockid", "QUJD"}};
  std::string want =
      "PUT\n\n\n11\nXrY7u+Ae7tCTyyK7j1rNww==\napplication/octet-stream\n\n\n\n*\n\n\n"
      "x-ms-blob-type:BlockBlob\nx-ms-date:Mon, 30 Nov 2026 06:42:02 GMT\nx-ms-version:2021-12-02\n"
      "/devstoreaccount1/devstoreaccount1/ckpts/run1/a.bin\nblockid:QUJD\ncomp:block";
  std::string sts = internal::SharedKeyStringToSign(in);
  EXPECT_EQ(sts, want);
  auto sig = internal::HmacSha256Base64(kDevKey, sts);
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(*sig, "8dtspuNGk5pesLR/EtIPCdnWOwkh5RB7mgCa4oXxMok=");

  // Content-Length 0 is written as an empty line.
  in.content_length = "0";
  EXPECT_EQ(internal::SharedKeyStringToSign(in).substr(0, 8), "PUT\n\n\n\nX");
  EXPECT_FALSE(internal::HmacSha256Base64("***", "x").ok());
}

TEST(ServiceSas, KnownAnswer) {
  internal::SasParams p;
  p.permissions = "r";
  p.start = "2026-11-30T00:00:00Z";
  p.expiry = "2026-12-01T00:00:00Z";
  p.version = "2021-12-02";
  p.protocol = "https,http";
  p.container = "ckpts";
  p.blob = "run1/a.bin";
  auto q = internal::MakeServiceSas("devstoreaccount1", kDevKey, p);
  ASSERT_TRUE(q.ok());
  // sig = Base64(HMAC-SHA256(key, "r\n<st>\n<se>\n/blob/devstoreaccount1/ckpts/run1/a.bin\n\n\n"
  //   "https,http\n2021-12-02\nb\n\n\n\n\n\n\n")), computed with Python.
  EXPECT_EQ(*q,
            "sv=2021-12-02&st=2026-11-30T00%3A00%3A00Z&se=2026-12-01T00%3A00%3A00Z&sr=b&sp=r&"
            "spr=https%2Chttp&sig=" +
                internal::UrlEncode("gl+ESulojbPD0Ug+PICGdfIgrq/gglSk7BYbfQb89G0="));
}

TEST(Base64, RoundTrip) {
  for (std::string s : {"", "a", "ab", "abc", "abcd", "hello world"}) {
    std::string enc = internal::Base64Encode(std::as_bytes(std::span(s.data(), s.size())));
    auto dec = internal::Base64Decode(enc);
    ASSERT_TRUE(dec.ok());
    EXPECT_EQ(*dec, s);
  }
  std::string hw = "hello world";
  EXPECT_EQ(internal::Base64Encode(std::as_bytes(std::span(hw.data(), hw.size()))),
            "aGVsbG8gd29ybGQ=");
  EXPECT_FALSE(internal::Base64Decode("a*b=").ok());
  EXPECT_EQ(internal::UrlEncode("a b/c=+", false), "a%20b%2Fc%3D%2B");
  EXPECT_EQ(internal::UrlEncode("a b/c", true), "a%20b/c");
}

TEST(ListBlobsXml, ParsesTheElementsWeUse) {
  std::string xml =
      "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults "
      "ServiceEndpoint=\"http://127.0.0.1/devstoreaccount1\" "
      "ContainerName=\"c\"><Prefix>p/</Prefix>"
      "<MaxResults>2</MaxResults><Blobs>"
      "<Blob><Name>p/a&amp;b</Name><Properties><Creation-Time>x</Creation-Time>"
      "<Last-Modified>Mon, 30 Nov 2026 06:42:02 GMT</Last-Modified><Etag>0x8DC1</Etag>"
      "<Content-Length>42</Content-Length><Content-Type>application/octet-stream</Content-Type>"
      "</Properties><Metadata/></Blob>"
      "<Blob>\n  <Name>p/&#x4E2D;</Name>\n  "
      "<Properties><Content-Length>0</Content-Length></Properties></Blob>"
      "</Blobs><NextMarker>2!16!abc</NextMarker></EnumerationResults>";
  auto r = internal::ParseListBlobsXml(xml);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(r->objects[0].key, "p/a&b");
  EXPECT_EQ(r->objects[0].size, 42u);
  EXPECT_EQ(r->objects[0].etag, "0x8DC1");
  EXPECT_EQ(r->objects[0].modified_unix, 1'796'020'922);
  EXPECT_EQ(r->objects[1].key, "p/\xE4\xB8\xAD");
  EXPECT_EQ(r->next_marker, "2!16!abc");

  auto last = internal::ParseListBlobsXml(
      "<EnumerationResults><Blobs /><NextMarker /></EnumerationResults>");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last->objects.empty());
  EXPECT_EQ(last->next_marker, "");
  EXPECT_FALSE(internal::ParseListBlobsXml("<html>proxy error</html>").ok());
}

TEST(Retry, BackoffAndRetryAfter) {
  RetryPolicy rp;  // 200 ms initial, 10 s cap
  for (uint64_t r : {0ull, 1ull, 12345ull, ~0ull}) {
    EXPECT_LE(internal::BackoffDelay(rp, 1, std::nullopt, r).count(), 200);
    EXPECT_LE(internal::BackoffDelay(rp, 3, std::nullopt, r).count(), 800);
    EXPECT_LE(internal::BackoffDelay(rp, 30, std::nullopt, r).count(), 10000);
    // Retry-After is a floor, bounded at 60 s.
    EXPECT_GE(internal::BackoffDelay(rp, 1, std::chrono::milliseconds(1000), r).count(), 1000);
    EXPECT_EQ(internal::BackoffDelay(rp, 1, std::chrono::milliseconds(3600000), r).count(), 60000);
  }
  // Full jitter reaches the cap.
  EXPECT_EQ(internal::BackoffDelay(rp, 3, std::nullopt, 800).count(), 800);
  EXPECT_EQ(internal::ParseRetryAfter("3"), std::chrono::milliseconds(3000));
  EXPECT_EQ(internal::ParseRetryAfter(""), std::nullopt);
  EXPECT_EQ(internal::ParseRetryAfter("soon"), std::nullopt);
  EXPECT_EQ(internal::ParseRetryAfter("Thu, 01 Jan 1970 00:01:00 GMT"),
            std::chrono::milliseconds(0));
}

TEST(HttpDate, Parses) {
  EXPECT_EQ(internal::ParseHttpDate("Thu, 01 Jan 1970 00:01:00 GMT"), 60);
  EXPECT_EQ(internal::ParseHttpDate("garbage"), 0);
}

}  // namespace
}  // namespace gantry::storage
