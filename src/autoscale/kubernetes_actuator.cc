// The `kubernetes` actuator: the scale subresource of a Deployment or
// StatefulSet (apps/v1), as `kubectl scale` and the HPA use it.
//
//   Read   GET /apis/apps/v1/namespaces/{ns}/{deployments|statefulsets}/{name}/scale
//              spec.replicas (target), metadata.resourceVersion
//          GET /apis/apps/v1/namespaces/{ns}/{deployments|statefulsets}/{name}
//              status.readyReplicas (ready); rollout in progress (busy)
//   Scale  PUT .../scale {"apiVersion":"autoscaling/v1","kind":"Scale",
//              "metadata":{name, namespace, resourceVersion},"spec":{"replicas":N}}
//          The resourceVersion read makes the write conditional (409 Conflict
//          when someone else scaled in between): re-read once and retry.
//
// Credentials: a kubeconfig (current-context or a named one: server,
// certificate-authority(-data), insecure-skip-tls-verify, token,
// client-certificate(-data)/client-key(-data)) or in-cluster (the service
// account's token, re-read on every request because the kubelet rotates it,
// and ca.crt).
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/autoscale/actuator.h"
#include "gantry/core/config.h"
#include "gantry/core/https_client.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/core/text.h"

namespace gantry::autoscale {
namespace {

// Where requests go and how they are authenticated.
struct Connection {
  std::string server;  // https://host:port, without a trailing slash
  http::TlsOptions tls;
  std::string token;       // a fixed bearer token (kubeconfig)
  std::string token_file;  // or one re-read on every request (in cluster)
  std::string identity;    // for messages: "kubeconfig user 'admin' (context 'aks-1')"
};

std::string TrimSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// A path in a kubeconfig is relative to the kubeconfig's directory.
std::string Resolve(const std::string& kubeconfig, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  return (std::filesystem::path(kubeconfig).parent_path() / path).string();
}

// The list item of `list` whose name is `name` (kubeconfig clusters, users, contexts).
Result<Config> Named(const Config& kc, const std::string& list, const std::string& name,
                     const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<Config> items, kc.Items(list));
  for (const Config& item : items) {
    ASSIGN_OR_RETURN(std::string n, item.GetString("name", ""));
    if (n == name) return item;
  }
  return NotFound("kubeconfig " + path + ": no entry named '" + name + "' under " + list);
}

// PEM from `<key>-data` (base64) or the file `<key>`, for TLS options.
Status PemOrFile(const Config& section, const std::string& key, const std::string& kubeconfig,
                 std::string* pem, std::string* file) {
  ASSIGN_OR_RETURN(std::string data, section.GetString(key + "-data", ""));
  if (!data.empty()) {
    Result<std::string> decoded = Base64Decode(data);
    if (!decoded.ok()) {
      return InvalidArgument(section.Locate(key + "-data") + ": not base64 (" +
                             decoded.status().message() + ")");
    }
    *pem = *decoded;
    return Status();
  }
  ASSIGN_OR_RETURN(std::string path, section.GetString(key, ""));
  if (!path.empty()) {
    *file = Resolve(kubeconfig, path);
    if (!std::filesystem::exists(*file)) {
      return NotFound(section.Locate(key) + ": file " + *file + " does not exist");
    }
  }
  return Status();
}

Result<Connection> FromKubeconfig(const KubernetesConfig& c) {
  ASSIGN_OR_RETURN(Config kc, Config::LoadFile(c.kubeconfig));
  std::string context = c.context;
  if (context.empty()) {
    ASSIGN_OR_RETURN(context, kc.GetString("current-context", ""));
    if (context.empty()) {
      return InvalidArgument("kubeconfig " + c.kubeconfig +
                             ": no current-context; name one with `context`");
    }
  }
  ASSIGN_OR_RETURN(Config ctx, Named(kc, "contexts", context, c.kubeconfig));
  ASSIGN_OR_RETURN(std::string cluster_name, ctx.GetString("context.cluster", ""));
  ASSIGN_OR_RETURN(std::string user_name, ctx.GetString("context.user", ""));
  ASSIGN_OR_RETURN(Config cluster, Named(kc, "clusters", cluster_name, c.kubeconfig));
  ASSIGN_OR_RETURN(Config cl, cluster.Sub("cluster"));

  Connection conn;
  ASSIGN_OR_RETURN(conn.server, cl.GetString("server", ""));
  if (!conn.server.starts_with("https://") && !conn.server.starts_with("http://")) {
    return InvalidArgument(cl.Locate("server") + ": expected an https:// URL, got '" + conn.server +
                           "'");
  }
  conn.server = TrimSlash(conn.server);
  ASSIGN_OR_RETURN(conn.tls.insecure_skip_verify, cl.GetBool("insecure-skip-tls-verify", false));
  RETURN_IF_ERROR(
      PemOrFile(cl, "certificate-authority", c.kubeconfig, &conn.tls.ca_pem, &conn.tls.ca_file));

  conn.identity = "kubeconfig user '" + user_name + "' (context '" + context + "')";
  if (!user_name.empty()) {
    ASSIGN_OR_RETURN(Config user, Named(kc, "users", user_name, c.kubeconfig));
    ASSIGN_OR_RETURN(Config u, user.Sub("user"));
    if (u.Has("exec") || u.Has("auth-provider")) {
      // kubelogin (AKS with Entra ID), gke-gcloud-auth-plugin, ...
      return Unimplemented(u.Locate(u.Has("exec") ? "exec" : "auth-provider") +
                           ": credential plugins are not supported; use a token, a client "
                           "certificate or in_cluster");
    }
    ASSIGN_OR_RETURN(conn.token, u.GetString("token", ""));
    ASSIGN_OR_RETURN(std::string token_file, u.GetString("tokenFile", ""));
    if (conn.token.empty() && !token_file.empty()) {
      conn.token_file = Resolve(c.kubeconfig, token_file);
    }
    RETURN_IF_ERROR(PemOrFile(u, "client-certificate", c.kubeconfig, &conn.tls.client_cert_pem,
                              &conn.tls.client_cert_file));
    RETURN_IF_ERROR(PemOrFile(u, "client-key", c.kubeconfig, &conn.tls.client_key_pem,
                              &conn.tls.client_key_file));
  }
  return conn;
}

Result<Connection> InCluster(const KubernetesConfig& c) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return FailedPrecondition(
        "kubernetes actuator: in_cluster is set but KUBERNETES_SERVICE_HOST/PORT are not (not "
        "running in a pod?); use a kubeconfig instead");
  }
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  Connection conn;
  conn.server = "https://" + h + ":" + port;
  std::string dir = TrimSlash(c.service_account_dir);
  conn.token_file = dir + "/token";
  conn.tls.ca_file = dir + "/ca.crt";
  for (const std::string& f : {conn.token_file, conn.tls.ca_file}) {
    if (!std::filesystem::exists(f)) {
      return NotFound("kubernetes actuator: in cluster, " + f +
                      " does not exist (is a service account token mounted?)");
    }
  }
  conn.identity = "service account token " + conn.token_file;
  return conn;
}

// A Kubernetes Status body {"kind":"Status","reason":"NotFound","message":"..."}
// as `Reason: "message"`, else the first 300 bytes.
std::string KubeError(const std::string& body) {
  Result<Json> j = ParseJson(body, "Kubernetes Status");
  if (j.ok() && j->is_object() && j->contains("message") && (*j)["message"].is_string()) {
    std::string reason = j->value("reason", std::string());
    return (reason.empty() ? "" : reason + ": ") + "\"" + (*j)["message"].get<std::string>() + "\"";
  }
  std::string s = body.substr(0, 300);
  return s.empty() ? "(no body)" : s;
}

int64_t IntAt(const Json& j, const char* a, const char* b) {
  if (!j.contains(a) || !j[a].is_object() || !j[a].contains(b) || !j[a][b].is_number_integer()) {
    return 0;
  }
  return j[a][b].get<int64_t>();
}

class KubernetesActuator : public Actuator {
 public:
  KubernetesActuator(KubernetesConfig c, Connection conn, std::string resource)
      : c_(std::move(c)), conn_(std::move(conn)) {
    object_ = conn_.server + "/apis/apps/v1/namespaces/" + http::PercentEncode(c_.namespace_) +
              "/" + resource + "/" + http::PercentEncode(c_.name);
    what_ = c_.kind + " " + c_.namespace_ + "/" + c_.name;
  }

  std::string_view kind() const override { return "kubernetes"; }
  // Kubernetes picks the pods to remove itself. The Kubernetes way to prefer
  // victims is the controller.kubernetes.io/pod-deletion-cost annotation on
  // the pods (Deployments/ReplicaSets only) before scaling in; not done here.
  bool CanChooseVictims() const override { return false; }

  Result<Capacity> Read() override {
    ASSIGN_OR_RETURN(Json scale, ReadScale());
    ASSIGN_OR_RETURN(http::Response resp, Exchange("GET", object_, ""));
    if (resp.status != 200) return HttpError(resp, "reading " + what_);
    ASSIGN_OR_RETURN(Json obj, ParseJson(resp.body, what_));
    Capacity cap;
    cap.target = IntAt(scale, "spec", "replicas");
    cap.ready = IntAt(obj, "status", "readyReplicas");
    int64_t spec = IntAt(obj, "spec", "replicas");
    int64_t generation = obj.contains("metadata") ? obj["metadata"].value("generation", 0) : 0;
    int64_t observed = IntAt(obj, "status", "observedGeneration");
    // A rollout or a scale still under way: the controller has not seen the
    // latest spec, or pods are still being added or removed, or (Deployments)
    // replaced. A StatefulSet's updatedReplicas may lag for good (OnDelete
    // updates), as may a paused Deployment's, so those do not count.
    bool paused = obj.contains("spec") && obj["spec"].value("paused", false);
    cap.busy =
        observed < generation || IntAt(obj, "status", "replicas") != spec ||
        (c_.kind == "Deployment" && !paused && IntAt(obj, "status", "updatedReplicas") < spec);
    return cap;
  }

  Status ScaleOut(int64_t desired) override { return SetReplicas(desired, "scale out"); }

  Status ScaleIn(int64_t desired, const std::vector<std::string>& victims) override {
    if (!victims.empty()) {
      return InvalidArgument("scale in " + what_ +
                             ": the kubernetes actuator cannot choose which pods go (got " +
                             Join(victims, ", ") + "); call it with the desired count");
    }
    return SetReplicas(desired, "scale in");
  }

 private:
  Result<Json> ReadScale() {
    ASSIGN_OR_RETURN(http::Response resp, Exchange("GET", object_ + "/scale", ""));
    if (resp.status != 200) return HttpError(resp, "reading the scale of " + what_);
    ASSIGN_OR_RETURN(Json scale, ParseJson(resp.body, "scale of " + what_));
    if (!scale.is_object()) return DataLoss("scale of " + what_ + ": not a JSON object");
    resource_version_ = scale.contains("metadata") && scale["metadata"].is_object()
                            ? scale["metadata"].value("resourceVersion", std::string())
                            : "";
    return scale;
  }

  Status SetReplicas(int64_t desired, const std::string& doing) {
    if (desired < 0) return InvalidArgument(doing + " " + what_ + ": negative replica count");
    std::string what = doing + " " + what_ + " to " + std::to_string(desired) + " replicas";
    if (resource_version_.empty()) RETURN_IF_ERROR(ReadScale().status());
    for (int attempt = 0;; ++attempt) {
      Json body = {{"apiVersion", "autoscaling/v1"},
                   {"kind", "Scale"},
                   {"metadata",
                    {{"name", c_.name},
                     {"namespace", c_.namespace_},
                     {"resourceVersion", resource_version_}}},
                   {"spec", {{"replicas", desired}}}};
      ASSIGN_OR_RETURN(http::Response resp, Exchange("PUT", object_ + "/scale", body.dump()));
      if (resp.status == 409 && attempt == 0) {
        // Scaled by someone else since our read: the count is absolute, so
        // take the new resourceVersion and write it again, once.
        log::info("autoscale: {} changed since it was read (resourceVersion {}); reading again",
                  what_, resource_version_);
        RETURN_IF_ERROR(ReadScale().status());
        continue;
      }
      resource_version_.clear();  // the write changed it
      if (resp.status == 409) {
        return FailedPrecondition(what + ": conflict twice (" + KubeError(resp.body) +
                                  "); another actor is scaling it; the next interval retries");
      }
      if (resp.status != 200 && resp.status != 201) return HttpError(resp, what);
      return Status();
    }
  }

  Result<http::Response> Exchange(const std::string& method, const std::string& url,
                                  const std::string& body) {
    http::Request req;
    req.method = method;
    req.url = url;
    req.deadline = c_.timeout;
    req.headers = {{"Accept", "application/json"}};
    std::string token = conn_.token;
    if (!conn_.token_file.empty()) {
      // Re-read each time: projected service-account tokens rotate (hourly).
      Result<std::string> t = ReadFile(conn_.token_file);
      if (!t.ok()) {
        return Status(t.status().code(), "kubernetes actuator: reading the token " +
                                             conn_.token_file + ": " + t.status().message());
      }
      token = std::string(TrimSpace(*t));
    }
    if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
    if (!body.empty()) {
      req.headers.emplace_back("Content-Type", "application/json");
      req.body = body;
    }
    Result<http::Response> resp = http::SendTls(req, conn_.tls);
    if (!resp.ok()) {
      return Status(resp.status().code(),
                    "Kubernetes API for " + what_ + ": " + resp.status().message());
    }
    return resp;
  }

  Status HttpError(const http::Response& resp, const std::string& what) const {
    std::string msg = what + ": HTTP " + std::to_string(resp.status) + " " + KubeError(resp.body);
    switch (resp.status) {
      case 401:
        return PermissionDenied(msg + "; " + conn_.identity + " was not accepted");
      case 403:
        return PermissionDenied(msg + "; " + conn_.identity + " needs RBAC get and update on " +
                                Resource() + "/scale and get on " + Resource());
      case 404:
        return NotFound(msg);
      case 429: {
        const std::string* ra = resp.FindHeader("Retry-After");
        return ResourceExhausted(msg + "; retry after " + (ra ? *ra : std::string("1")) + " s");
      }
      default:
        if (resp.status >= 500) return Unavailable(msg);
        return FailedPrecondition(msg);
    }
  }

  std::string Resource() const { return c_.kind == "StatefulSet" ? "statefulsets" : "deployments"; }

  KubernetesConfig c_;
  Connection conn_;
  std::string object_, what_;
  std::string resource_version_;  // of the scale subresource, from the last read
};

}  // namespace

Result<std::unique_ptr<Actuator>> NewKubernetesActuator(const KubernetesConfig& config) {
  std::string resource;
  if (config.kind == "Deployment") {
    resource = "deployments";
  } else if (config.kind == "StatefulSet") {
    resource = "statefulsets";
  } else {
    return InvalidArgument("kubernetes actuator: kind '" + config.kind +
                           "' is not Deployment or StatefulSet");
  }
  if (config.name.empty() || config.namespace_.empty()) {
    return InvalidArgument("kubernetes actuator: name and namespace are required");
  }
  if (config.in_cluster == !config.kubeconfig.empty()) {
    return InvalidArgument(
        "kubernetes actuator: set exactly one of kubeconfig (a file) and in_cluster");
  }
  if (config.timeout.count() <= 0) {
    return InvalidArgument("kubernetes actuator: timeout must be positive");
  }
  ASSIGN_OR_RETURN(Connection conn, config.in_cluster ? InCluster(config) : FromKubeconfig(config));
  return std::unique_ptr<Actuator>(new KubernetesActuator(config, std::move(conn), resource));
}

}  // namespace gantry::autoscale
