// `gantry autoscale run` as a core::Service: the controller's loop thread and
// its HTTP endpoints (controller.h).
#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "gantry/autoscale/controller.h"
#include "gantry/core/http_server.h"
#include "gantry/core/log.h"
#include "gantry/core/metrics.h"

namespace gantry::autoscale {
namespace {

class AutoscaleService : public Service {
 public:
  AutoscaleService(std::string path, ControllerOptions options)
      : path_(std::move(path)), options_(std::move(options)) {}
  ~AutoscaleService() override { StopLoop(); }

  std::string_view name() const override { return "autoscale"; }

  Status Start() override {
    ASSIGN_OR_RETURN(AutoscaleConfig config, LoadAutoscaleConfig(path_));
    listen_ = config.listen;
    ASSIGN_OR_RETURN(std::shared_ptr<Controller> controller, Build(std::move(config)));
    {
      std::lock_guard<std::mutex> lock(mu_);
      controller_ = std::move(controller);
    }
    if (!listen_.empty()) {
      Routes();
      RETURN_IF_ERROR(server_.Start({.listen = listen_}));
    }
    loop_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  std::string ReadyMessage() const override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = controller_->StatusJson()["targets"].size();
    std::string where =
        listen_.empty() ? ""
                        : fmt::format(", status on http://{}:{}/status", Host(), server_.port());
    return fmt::format("gantry autoscale: {} target(s) from {}{}{}", n, path_,
                       options_.dry_run ? " (dry run)" : "", where);
  }

  // A new configuration replaces the controller; the deciders start again
  // from the current counts (their down windows are seeded with them, so a
  // reload never lets a scale-in through early).
  Status Reload(std::string_view why) override {
    ASSIGN_OR_RETURN(AutoscaleConfig config, LoadAutoscaleConfig(path_));
    if (config.listen != listen_) {
      return FailedPrecondition(
          fmt::format("{}: listen changed from '{}' to '{}'; restart to move it", path_, listen_,
                      config.listen));
    }
    ASSIGN_OR_RETURN(std::shared_ptr<Controller> controller, Build(std::move(config)));
    {
      std::lock_guard<std::mutex> lock(mu_);
      controller_ = std::move(controller);
    }
    log::info("autoscale: configuration reloaded ({})", why);
    cv_.notify_all();
    return Status::Ok();
  }

  void Stop(std::chrono::milliseconds) override {
    server_.Stop();
    StopLoop();
  }

 private:
  Result<std::shared_ptr<Controller>> Build(AutoscaleConfig config) {
    ASSIGN_OR_RETURN(std::unique_ptr<Controller> c,
                     Controller::Create(std::move(config), options_));
    return std::shared_ptr<Controller>(std::move(c));
  }

  std::shared_ptr<Controller> Current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return controller_;
  }

  std::string Host() const {
    std::string h = listen_.substr(0, listen_.rfind(':'));
    return h.empty() ? "0.0.0.0" : h;
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      std::shared_ptr<Controller> c = controller_;
      lock.unlock();
      std::chrono::milliseconds wait = c->RunDue();
      lock.lock();
      if (stop_) break;
      if (wake_pending_) {
        wake_pending_ = false;
        continue;
      }
      cv_.wait_for(lock, wait, [this] { return stop_ || wake_pending_; });
      wake_pending_ = false;
    }
  }

  void StopLoop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (loop_.joinable()) loop_.join();
  }

  void Routes() {
    auto json = [](http::ServerResponse* r, int status, const Json& body) {
      r->status = status;
      r->content_type = "application/json";
      r->body = body.dump(2) + "\n";
    };
    server_.Handle("/status",
                   [this, json](const http::ServerRequest& req, http::ServerResponse* r) {
                     if (req.method != "GET") return json(r, 405, {{"error", "use GET /status"}});
                     json(r, 200, Current()->StatusJson());
                   });
    server_.Handle("/metrics", [this](const http::ServerRequest&, http::ServerResponse* r) {
      r->content_type = std::string(metrics::Registry::kContentType);
      r->body = Current()->MetricsText();
    });
    server_.Handle("/healthz", [](const http::ServerRequest&, http::ServerResponse* r) {
      r->content_type = "text/plain";
      r->body = "ok\n";
    });
    // The gateway holds requests for a pool at zero and asks for capacity.
    server_.Handle("/wake/", [this, json](const http::ServerRequest& req, http::ServerResponse* r) {
      if (req.method != "POST") return json(r, 405, {{"error", "use POST /wake/<target>"}});
      std::string target = req.path.substr(std::string_view("/wake/").size());
      Status s = Current()->Wake(target);
      if (!s.ok()) return json(r, 404, {{"error", s.message()}});
      {
        std::lock_guard<std::mutex> lock(mu_);
        wake_pending_ = true;
      }
      cv_.notify_all();
      json(r, 202, {{"target", target}, {"woken", true}});
    });
  }

  std::string path_;
  ControllerOptions options_;
  std::string listen_;
  http::Server server_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<Controller> controller_;
  bool stop_ = false;
  bool wake_pending_ = false;
  std::thread loop_;
};

}  // namespace

Result<std::unique_ptr<Service>> NewAutoscaleService(const std::string& config_path,
                                                     ControllerOptions options) {
  return std::unique_ptr<Service>(new AutoscaleService(config_path, std::move(options)));
}

}  // namespace gantry::autoscale
