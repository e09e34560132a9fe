#include "runtime/admin_server.hpp"

#include <httplib.h>

#include <sstream>
#include <thread>

#include "config/loader.hpp"
#include "runtime/admin_page.hpp"
#include "runtime/daemon.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"

namespace kvrelay {

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

struct admin_server::impl {
  daemon& d;
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::string token;
  struct route {
    std::string method, path, help;
  };
  std::vector<route> routes;

  explicit impl(daemon& dd) : d(dd) {}

  bool authorized(const httplib::Request& req) const {
    if (token.empty()) return true;
    return req.get_header_value("Authorization") == "Bearer " + token;
  }

  template <class F>
  void add(const std::string& method, const std::string& path, const std::string& help, F f) {
    routes.push_back({method, path, help});
    // The token guards what changes the daemon and the /debug pages that show its insides;
    // probes, /metrics and /help stay open so kubelet and Prometheus need no secret.
    const bool guarded = method != "GET" || path.rfind("/debug/", 0) == 0;
    auto wrapped = [this, f, guarded](const httplib::Request& req, httplib::Response& res) {
      if (guarded && !authorized(req)) {
        res.status = 401;
        res.set_content("unauthorized: send 'Authorization: Bearer <token>'\n", "text/plain");
        return;
      }
      f(req, res);
    };
    if (method == "GET") server.Get(path, wrapped);
    else server.Post(path, wrapped);
  }
};

admin_server::admin_server(daemon& d) : impl_(std::make_unique<impl>(d)) {}
admin_server::~admin_server() { stop(); }

bool admin_server::start(const config::admin_settings& s, std::string& error) {
  auto& a = *impl_;
  auto colon = s.listen.rfind(':');
  if (colon == std::string::npos) {
    error = "admin.listen: expected host:port, got \"" + s.listen + "\"";
    return false;
  }
  std::string host = s.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = std::atoi(s.listen.c_str() + colon + 1);
  // config::resolve() read and checked the token before anything started; a configuration
  // built in code may name only the file, which is then read with the same bounded reader.
  a.token = s.token;
  if (a.token.empty() && !s.token_file.empty()) {
    auto token = config::read_token_file(s.token_file);
    if (!token) {
      error = "admin.token_file: " + token.error().context;
      return false;
    }
    a.token = std::move(token).value();
  }
  if (!is_loopback_host(host) && a.token.empty()) {
    error = "admin.listen: " + s.listen +
            " is not loopback; set admin.token_file so the port is not open to anyone";
    return false;
  }
  daemon& d = a.d;
  a.add("GET", "/healthz", "process alive", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  a.add("GET", "/readyz",
        "200 when every pipeline decoded a batch or caught up, and the policy server answered; "
        "the body lists why not, and degraded pipelines",
        [&d](const httplib::Request&, httplib::Response& res) {
          std::vector<std::string> reasons;
          bool ok = d.ready(&reasons);
          res.status = ok ? 200 : 503;
          std::string body = ok ? "ready\n" : "not ready\n";
          for (const auto& r : reasons) body += r + "\n";
          res.set_content(body, "text/plain");
        });
  a.add("GET", "/metrics", "Prometheus metrics (text format 0.0.4)",
        [&d](const httplib::Request&, httplib::Response& res) {
          std::string body = d.metrics().render();
          body += "# HELP kvrelay_ready 1 when /readyz is 200\n# TYPE kvrelay_ready gauge\n";
          body += std::string("kvrelay_ready ") + (d.ready() ? "1" : "0") + "\n";
          res.set_content(body, "text/plain; version=0.0.4");
        });
  a.add("GET", "/debug/tree", "every actor: kind, state, mailbox, restarts, last error, uptime",
        [&d](const httplib::Request&, httplib::Response& res) {
          res.set_content(d.tree_json() + "\n", "application/json");
        });
  a.add("GET", "/debug/engines", "per pipeline: endpoints, last seq, adapters, readiness",
        [&d](const httplib::Request&, httplib::Response& res) {
          res.set_content(d.engines_json() + "\n", "application/json");
        });
  a.add("POST", "/debug/adapters",
        "add a LoRA id→name mapping: ?id=N&name=S[&replica=R] (all replicas when R is absent)",
        [&d](const httplib::Request& req, httplib::Response& res) {
          if (!req.has_param("id") || !req.has_param("name") || req.get_param_value("name").empty()) {
            res.status = 400;
            res.set_content("need id and name parameters\n", "text/plain");
            return;
          }
          char* end = nullptr;
          const auto id_text = req.get_param_value("id");
          long long id = std::strtoll(id_text.c_str(), &end, 10);
          if (id_text.empty() || *end != '\0') {
            res.status = 400;
            res.set_content("id must be an integer\n", "text/plain");
            return;
          }
          bool ok = d.add_adapter(req.get_param_value("replica"), id, req.get_param_value("name"));
          res.status = ok ? 200 : 404;
          res.set_content(ok ? "added\n" : "no such replica\n", "text/plain");
        });
  if (s.enable_crash_endpoint) {
    a.add("POST", "/debug/crash",
          "fault injection: ?pipeline=P&actor=emitter|scraper|decoder|ingress|debouncer|shard",
          [&d](const httplib::Request& req, httplib::Response& res) {
            bool ok = d.crash(req.get_param_value("pipeline"), req.get_param_value("actor"));
            res.status = ok ? 200 : 404;
            res.set_content(ok ? "crashed\n" : "no such pipeline or actor\n", "text/plain");
          });
  }
  a.add("GET", "/", "the admin page (HTML)", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(admin_page_html().data(), admin_page_html().size(), admin_page_content_type);
  });
  a.add("GET", "/help", "this list", [&a](const httplib::Request&, httplib::Response& res) {
    std::ostringstream out;
    for (const auto& r : a.routes) out << r.method << ' ' << r.path << "\t" << r.help << '\n';
    res.set_content(out.str(), "text/plain");
  });
  a.server.set_keep_alive_max_count(100);
  a.port = port == 0 ? a.server.bind_to_any_port(host) : (a.server.bind_to_port(host, port) ? port : -1);
  if (a.port <= 0) {
    error = "admin.listen: cannot bind " + s.listen;
    return false;
  }
  a.thread = std::thread([&a] { a.server.listen_after_bind(); });
  log::info("admin port listening", {{"listen", host + ":" + std::to_string(a.port)}});
  return true;
}

void admin_server::stop() {
  auto& a = *impl_;
  if (a.thread.joinable()) {
    a.server.stop();
    a.thread.join();
  }
}

uint16_t admin_server::port() const { return static_cast<uint16_t>(impl_->port); }

}  // namespace kvrelay
