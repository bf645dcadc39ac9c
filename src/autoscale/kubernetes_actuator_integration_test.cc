// The kubernetes actuator against a Kubernetes API contract server
// (tests/autoscale/k8s_contract_server.js), over HTTP with a kubeconfig and
// over HTTPS in cluster, and its requests compared with those the official
// @kubernetes/client-node sends for the same operations (k8s_sdk_ops.js).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "gantry/autoscale/actuator.h"
#include "gantry/core/text.h"
#include "node_contract_server.h"
#include "testing/temp_dir.h"

namespace gantry::autoscale {
namespace {

using namespace std::chrono_literals;
using testing::Essence;
using testing::NodeServer;
using testing::OfOp;
using testing::ReadRecords;

constexpr char kToken[] = "k8s-test-token";

class KubernetesActuatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = testing::NodeMissing("@kubernetes/client-node");
    ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
  }

  std::unique_ptr<NodeServer> Serve(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"--record", dir_.Path(name + ".jsonl")};
    args.insert(args.end(), extra.begin(), extra.end());
    auto s = std::make_unique<NodeServer>("k8s_contract_server.js", args);
    EXPECT_TRUE(s->ok()) << s->error();
    return s;
  }
  std::vector<Json> Records(const std::string& name) {
    return ReadRecords(dir_.Path(name + ".jsonl"));
  }

  // A kubeconfig with two contexts; the current one points at `server`.
  std::string Kubeconfig(const std::string& server, const std::string& token,
                         const std::string& cluster_extra = "") {
    return dir_.Write("kubeconfig", R"(apiVersion: v1
kind: Config
current-context: test
clusters:
- name: other
  cluster:
    server: https://192.0.2.1:6443
- name: local
  cluster:
    server: )" + server + "\n" + cluster_extra +
                                        R"(
contexts:
- name: elsewhere
  context:
    cluster: other
    user: admin
- name: test
  context:
    cluster: local
    user: admin
    namespace: default
users:
- name: admin
  user:
    token: )" + token + "\n");
  }

  KubernetesConfig Config(const std::string& kubeconfig) {
    KubernetesConfig c;
    c.name = "web";
    c.kubeconfig = kubeconfig;
    c.timeout = 5s;
    return c;
  }

  std::unique_ptr<Actuator> New(const KubernetesConfig& c) {
    Result<std::unique_ptr<Actuator>> a = NewKubernetesActuator(c);
    EXPECT_TRUE(a.ok()) << a.status().message();
    return a.ok() ? std::move(*a) : nullptr;
  }

  ::gantry::testing::TempDir dir_{"gantry-k8s-test"};
};

TEST_F(KubernetesActuatorTest, ReadsAndScalesThroughTheScaleSubresource) {
  auto server = Serve("gantry", {"--token", kToken, "--replicas", "3", "--ready", "2"});
  ASSERT_TRUE(server->ok());
  auto k8s = New(Config(Kubeconfig(server->url(), kToken)));
  ASSERT_NE(k8s, nullptr);
  EXPECT_EQ(k8s->kind(), "kubernetes");
  EXPECT_FALSE(k8s->CanChooseVictims());

  Result<Capacity> cap = k8s->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  EXPECT_EQ(cap->target, 3);
  EXPECT_EQ(cap->ready, 2);
  EXPECT_FALSE(cap->busy);
  EXPECT_TRUE(cap->instances.empty());

  ASSERT_TRUE(k8s->ScaleOut(6).ok());
  cap = k8s->Read();
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->target, 6);

  Status in = k8s->ScaleIn(4, {});
  ASSERT_TRUE(in.ok()) << in.message();
  EXPECT_EQ(k8s->Read()->target, 4);
  EXPECT_EQ(k8s->ScaleIn(3, {"web-abc"}).code(), StatusCode::kInvalidArgument);

  std::vector<Json> puts = OfOp(Records("gantry"), "replace_scale");
  ASSERT_EQ(puts.size(), 2u);
  EXPECT_EQ(puts[0]["body"]["metadata"]["resourceVersion"], "1000");
  EXPECT_EQ(puts[1]["body"]["metadata"]["resourceVersion"], "1001");

  KubernetesConfig sts = Config(dir_.Path("kubeconfig"));
  sts.kind = "StatefulSet";
  auto s = New(sts);
  ASSERT_TRUE(s->Read().ok());
  EXPECT_EQ(OfOp(Records("gantry"), "read_scale").back()["path"],
            "/apis/apps/v1/namespaces/default/statefulsets/web/scale");
}

TEST_F(KubernetesActuatorTest, SendsWhatTheOfficialClientSends) {
  auto ours = Serve("gantry", {"--token", kToken});
  auto theirs = Serve("sdk", {"--token", kToken});
  ASSERT_TRUE(ours->ok() && theirs->ok());
  auto k8s = New(Config(Kubeconfig(ours->url(), kToken)));
  ASSERT_TRUE(k8s->Read().ok());
  ASSERT_TRUE(k8s->ScaleOut(5).ok());

  Result<SubprocessResult> sdk = RunSubprocess(
      {testing::NodeBinary(), testing::SourceDir() + "/tests/autoscale/k8s_sdk_ops.js", "--server",
       theirs->url(), "--token", kToken, "--namespace", "default", "--name", "web", "--replicas",
       "5"},
      60s);
  ASSERT_TRUE(sdk.ok()) << sdk.status().message();
  ASSERT_EQ(sdk->exit_code, 0) << sdk->err;

  std::vector<Json> g = Records("gantry"), s = Records("sdk");
  const std::vector<std::string> headers = {"authorization", "content-type"};
  for (const char* op : {"read_scale", "read_object", "replace_scale"}) {
    std::vector<Json> go = OfOp(g, op), so = OfOp(s, op);
    ASSERT_FALSE(go.empty()) << "Gantry sent no " << op;
    ASSERT_FALSE(so.empty()) << "the official client sent no " << op;
    EXPECT_EQ(Essence(go[0], headers).dump(2), Essence(so[0], headers).dump(2)) << op;
  }
}

TEST_F(KubernetesActuatorTest, AConflictIsReadAgainOnce) {
  auto server = Serve("gantry", {"--token", kToken, "--conflict"});
  ASSERT_TRUE(server->ok());
  auto k8s = New(Config(Kubeconfig(server->url(), kToken)));
  ASSERT_TRUE(k8s->Read().ok());
  Status out = k8s->ScaleOut(4);
  ASSERT_TRUE(out.ok()) << out.message();
  std::vector<Json> puts = OfOp(Records("gantry"), "replace_scale");
  ASSERT_EQ(puts.size(), 2u);
  EXPECT_EQ(puts[0]["body"]["metadata"]["resourceVersion"], "1000");
  EXPECT_EQ(puts[1]["body"]["metadata"]["resourceVersion"], "1001");
  EXPECT_EQ(k8s->Read()->target, 4);
}

TEST_F(KubernetesActuatorTest, ErrorsNameTheObjectAndTheIdentity) {
  auto server = Serve("gantry", {"--token", kToken});
  ASSERT_TRUE(server->ok());
  auto wrong = New(Config(Kubeconfig(server->url(), "stale-token")));
  Result<Capacity> denied = wrong->Read();
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.status().message().find("kubeconfig user 'admin' (context 'test')"),
            std::string::npos)
      << denied.status().message();

  KubernetesConfig c = Config(Kubeconfig(server->url(), kToken));
  c.name = "missing";
  Result<Capacity> missing = New(c)->Read();
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(R"(NotFound: "deployments.apps "missing" not found")"),
            std::string::npos)
      << missing.status().message();

  c.kind = "ReplicaSet";
  EXPECT_EQ(NewKubernetesActuator(c).status().code(), StatusCode::kInvalidArgument);
  c.kind = "Deployment";
  c.context = "nowhere";
  EXPECT_EQ(NewKubernetesActuator(c).status().code(), StatusCode::kNotFound);

  std::string exec = dir_.Write("exec-kubeconfig", R"(current-context: aks
clusters:
- name: aks
  cluster:
    server: https://aks.example:443
contexts:
- name: aks
  context: {cluster: aks, user: entra}
users:
- name: entra
  user:
    exec:
      command: kubelogin
)");
  Result<std::unique_ptr<Actuator>> plugin = NewKubernetesActuator(Config(exec));
  EXPECT_EQ(plugin.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(plugin.status().message().find("exec-kubeconfig:"), std::string::npos)
      << plugin.status().message();
}

// In cluster: HTTPS with the service account's ca.crt, the token re-read on
// every request; and a kubeconfig with certificate-authority-data.
TEST_F(KubernetesActuatorTest, InClusterOverTlsRereadsTheRotatingToken) {
  ASSERT_FALSE(FindExecutable("openssl").empty())
      << "no openssl binary: install the Debian package openssl (scripts/install-deps.sh)";
  std::string sa = dir_.Path("sa");
  std::filesystem::create_directories(sa);
  Result<SubprocessResult> gen =
      RunSubprocess({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                     "-subj", "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                     dir_.Path("key.pem"), "-out", sa + "/ca.crt"},
                    60s);
  ASSERT_TRUE(gen.ok() && gen->exit_code == 0);
  dir_.Write("sa/token", "token-one\n");
  auto server = Serve("tls", {"--tls-cert", sa + "/ca.crt", "--tls-key", dir_.Path("key.pem"),
                              "--token-file", sa + "/token"});
  ASSERT_TRUE(server->ok());
  ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", std::to_string(server->port()).c_str(), 1);

  KubernetesConfig c;
  c.name = "web";
  c.in_cluster = true;
  c.service_account_dir = sa;
  auto k8s = New(c);
  ASSERT_NE(k8s, nullptr);
  Result<Capacity> cap = k8s->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  EXPECT_EQ(cap->target, 2);

  dir_.Write("sa/token", "token-two\n");  // the kubelet rotated it
  Status in = k8s->ScaleIn(1, {});
  ASSERT_TRUE(in.ok()) << in.message();
  std::vector<Json> r = Records("tls");
  EXPECT_EQ(r.front()["headers"]["authorization"], "Bearer token-one");
  EXPECT_EQ(r.back()["headers"]["authorization"], "Bearer token-two");

  Result<std::string> pem = ReadFile(sa + "/ca.crt");
  ASSERT_TRUE(pem.ok());
  auto by_kubeconfig =
      New(Config(Kubeconfig("https://127.0.0.1:" + std::to_string(server->port()), "token-two",
                            "    certificate-authority-data: " + Base64Encode(*pem) + "\n")));
  cap = by_kubeconfig->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  EXPECT_EQ(cap->target, 1);

  // Without the CA the server is not trusted.
  auto untrusted =
      New(Config(Kubeconfig("https://127.0.0.1:" + std::to_string(server->port()), "token-two")));
  EXPECT_EQ(untrusted->Read().status().code(), StatusCode::kFailedPrecondition);
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
}

// A kubeconfig user with client-certificate-data / client-key-data (kind,
// kubeadm), the server's CA as a file path relative to the kubeconfig.
TEST_F(KubernetesActuatorTest, KubeconfigClientCertificate) {
  ASSERT_FALSE(FindExecutable("openssl").empty())
      << "no openssl binary: install the Debian package openssl (scripts/install-deps.sh)";
  auto self_signed = [&](const std::string& cn, const std::string& cert, const std::string& key) {
    Result<SubprocessResult> gen =
        RunSubprocess({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                       "-subj", "/CN=" + cn, "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                       dir_.Path(key), "-out", dir_.Path(cert)},
                      60s);
    return gen.ok() && gen->exit_code == 0;
  };
  ASSERT_TRUE(self_signed("kubernetes", "server.crt", "server.key"));
  ASSERT_TRUE(self_signed("admin", "client.crt", "client.key"));
  auto server = Serve("mtls", {"--tls-cert", dir_.Path("server.crt"), "--tls-key",
                               dir_.Path("server.key"), "--client-ca", dir_.Path("client.crt")});
  ASSERT_TRUE(server->ok());
  Result<std::string> cert = ReadFile(dir_.Path("client.crt")),
                      key = ReadFile(dir_.Path("client.key"));
  ASSERT_TRUE(cert.ok() && key.ok());
  std::string kubeconfig = dir_.Write("kind-kubeconfig", R"(apiVersion: v1
kind: Config
current-context: kind
clusters:
- name: kind
  cluster:
    server: https://127.0.0.1:)" + std::to_string(server->port()) +
                                                             R"(
    certificate-authority: server.crt
contexts:
- name: kind
  context: {cluster: kind, user: kind-admin}
users:
- name: kind-admin
  user:
    client-certificate-data: )" + Base64Encode(*cert) + R"(
    client-key-data: )" + Base64Encode(*key) + "\n");
  auto k8s = New(Config(kubeconfig));
  ASSERT_NE(k8s, nullptr);
  Result<Capacity> cap = k8s->Read();
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  EXPECT_EQ(cap->target, 2);
  EXPECT_TRUE(k8s->ScaleOut(3).ok());
  EXPECT_FALSE(Records("mtls").back()["headers"].contains("authorization"));
}

}  // namespace
}  // namespace gantry::autoscale
