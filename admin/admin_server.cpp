// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "admin/admin_server.hpp"

#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "config/loader.hpp"
#include "admin/admin_page.hpp"
#include "admin/status_render.hpp"

namespace kvrelay {

namespace {

struct addrinfo_list {
  addrinfo* head = nullptr;
  ~addrinfo_list() {
    if (head) freeaddrinfo(head);
  }
};

// Resolves `host` ("" = every interface) for a TCP listener; "" on success. AI_ADDRCONFIG first
// (no IPv6 answers on an IPv4-only host), then without it: it hides loopback addresses on a host
// whose only configured interface is loopback.
std::string resolve(const std::string& host, const std::string& port, addrinfo_list& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = 0;
  for (int flags : {AI_PASSIVE | AI_ADDRCONFIG, AI_PASSIVE}) {
    hints.ai_flags = flags;
    rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &out.head);
    if (rc == 0 && out.head) return {};
  }
  return gai_strerror(rc);
}

// Compares without an early exit, so response times do not reveal how much of a guess matched
// (the length is not the secret).
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// A LoRA id exactly as TOML keys and --lora-adapter-names read it (config's parser: base-10,
// optional sign, the whole int64 range and nothing beyond it). An out-of-range id is refused,
// never clamped.
bool parse_adapter_id(const std::string& text, int64_t& id) {
  if (text.empty() || text.find_first_not_of("+-0123456789") != std::string::npos) return false;
  std::map<int64_t, std::string> one;
  if (!config::parse_adapter_names(text + "=x", one) || one.size() != 1) return false;
  id = one.begin()->first;
  return true;
}

// /readyz/self: how long kvrelay's actors may take to answer before kvrelay counts as not
// working; below the probes' 3 s timeout (deploy/kubernetes/sidecar).
constexpr std::chrono::milliseconds self_probe_timeout{1500};

http_response reply(int status, std::string body, std::string type = "text/plain") {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(type);
  return r;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host.empty()) return false;  // every interface
  addrinfo_list list;
  if (!resolve(host, "0", list).empty() || !list.head) return false;
  for (auto* ai = list.head; ai; ai = ai->ai_next)
    if (!is_loopback_address(ai->ai_addr)) return false;
  return true;
}

http_limits admin_limits_from(const config::admin_settings& s) {
  http_limits l;
  l.max_connections = static_cast<size_t>(std::max<int64_t>(s.max_connections, 1));
  l.read_timeout = s.read_timeout;
  l.idle_timeout = s.idle_timeout;
  l.max_body_bytes = static_cast<size_t>(std::max<int64_t>(s.max_body_bytes, 0));
  return l;
}

struct admin_server::impl {
  backend b;
  std::unique_ptr<http_server> server;
  std::string token;
  struct route {
    std::string method, path, help;
  };
  std::vector<route> routes;

  explicit impl(backend bb) : b(std::move(bb)) {}

  // The token guards what changes the daemon and the /debug pages that show its insides;
  // probes, /metrics and /help stay open so kubelet and Prometheus need no secret.
  static bool guarded(const http_request& r) {
    return r.method != "GET" || r.path.rfind("/debug/", 0) == 0;
  }

  // What a pod's or host's other addresses get without a token (admin.public): the read-only
  // answers Prometheus and a probe need, nothing that shows the insides or changes anything.
  static bool read_only(const http_request& r) {
    return r.method == "GET" && (r.path == "/healthz" || r.path == "/readyz" ||
                                 r.path == "/readyz/self" || r.path == "/metrics");
  }
  std::string listening;  // what start() bound, for the start line

  bool authorized(const http_request& req) const {
    if (token.empty()) return true;
    const auto* h = req.header("authorization");
    return h && h->size() > 7 && h->compare(0, 7, "Bearer ") == 0 &&
           same_secret(std::string_view(*h).substr(7), token);
  }

  void add(const std::string& method, const std::string& path, const std::string& help,
           http_server::handler f, http_server::runs_on where = http_server::runs_on::worker) {
    routes.push_back({method, path, help});
    server->route(method, path, std::move(f), where);
  }

  std::string metrics_text() const {
    std::string body = b.metrics->render();
    const bool ready = b.client.ready().first;
    body += "# HELP kvrelay_ready 1 when /readyz is 200\n# TYPE kvrelay_ready gauge\n";
    body += std::string("kvrelay_ready ") + (ready ? "1" : "0") + "\n";
    const auto st = server->stats();
    body += "# HELP kvrelay_admin_connections_total Admin port connections by outcome\n"
            "# TYPE kvrelay_admin_connections_total counter\n";
    const std::pair<const char*, uint64_t> rows[] = {
        {"accepted", st.accepted}, {"evicted", st.evicted},   {"refused", st.refused},
        {"timed_out", st.timed_out}, {"rejected", st.rejected}};
    for (const auto& [k, v] : rows)
      body += std::string("kvrelay_admin_connections_total{outcome=\"") + k + "\"} " +
              std::to_string(v) + "\n";
    body += "# HELP kvrelay_admin_open_connections Admin port connections open now\n"
            "# TYPE kvrelay_admin_open_connections gauge\n"
            "kvrelay_admin_open_connections " + std::to_string(st.open) + "\n";
    return body;
  }

  void add_routes(bool crash_endpoint) {
    add("GET", "/healthz", "process alive",
        [](const http_request&, http_response& res) { res = reply(200, "ok\n"); },
        http_server::runs_on::io_thread);
    add("GET", "/readyz",
        "200 when every pipeline decoded a batch or caught up, and the policy server answered; "
        "the body lists why not, and degraded pipelines",
        [this](const http_request&, http_response& res) {
          auto [ok, why] = b.client.ready();
          // One of several policy targets down leaves the pipeline ready (server.readiness):
          // say so, or "ready" would hide it.
          if (const auto views = b.client.status())
            for (auto& line : target_readiness_lines(views->pipelines)) why.push_back(std::move(line));
          std::string body = ok ? "ready\n" : "not ready\n";
          for (const auto& w : why) body += "- " + w + "\n";
          res = reply(ok ? 200 : 503, std::move(body));
        });
    // Fail open: a cache-hint sidecar must never take its engine out of service, so
    // the probe a pod's readiness hangs on asks only whether kvrelay itself works -- its root
    // actor answers in time -- and never depends on the engine or the policy server. The full
    // picture stays on /readyz, kvrelay_ready and the KvrelayNotReady alert.
    add("GET", "/readyz/self",
        "200 while kvrelay itself works (its actors answer), whatever the engine and the policy "
        "server do: the probe for a pod's readiness; /readyz has the full picture",
        [this](const http_request&, http_response& res) {
          const auto views = b.client.status(self_probe_timeout);
          if (!views)
            return void(res = reply(503, "not working: kvrelay's actors did not answer within " +
                                             std::to_string(self_probe_timeout.count()) +
                                             " ms\n"));
          res = reply(200, "working: " + std::to_string(views->pipelines.size()) +
                               " pipeline(s) answering; readiness toward the engine and the "
                               "policy server is on /readyz\n");
        });
    add("GET", "/metrics", "Prometheus metrics (text format 0.0.4)",
        [this](const http_request&, http_response& res) {
          res = reply(200, metrics_text(), "text/plain; version=0.0.4");
        });
    const auto uptime = [this] {
      return std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::steady_clock::now() - b.started)
          .count();
    };
    add("GET", "/debug/tree",
        "every actor: kind, state, mailbox, restarts, last error, uptime; engine discovery",
        [this, uptime](const http_request&, http_response& res) {
          auto views = b.client.status();
          if (!views) return void(res = reply(503, "the daemon did not answer in time\n"));
          res = reply(200,
                      render_tree(views->pipelines, uptime(), views->discovery,
                                  b.budget ? budget_json(*b.budget) : std::string()) +
                          "\n",
                      "application/json");
        });
    add("GET", "/debug/engines", "per pipeline: endpoints, last seq, adapters, readiness",
        [this](const http_request&, http_response& res) {
          auto views = b.client.status();
          if (!views) return void(res = reply(503, "the daemon did not answer in time\n"));
          res = reply(200, render_engines(views->pipelines) + "\n", "application/json");
        });
    add("POST", "/debug/adapters",
        "add a LoRA id→name mapping: ?id=N&name=S[&replica=R] (all replicas when R is absent)",
        [this](const http_request& req, http_response& res) {
          if (!req.has_param("id") || req.param("name").empty())
            return void(res = reply(400, "need id and name parameters\n"));
          int64_t id = 0;
          if (!parse_adapter_id(req.param("id"), id))
            return void(res = reply(400, "id must be a base-10 integer in the int64 range, as in "
                                         "[engine.adapters] and --lora-adapter-names\n"));
          const bool ok = b.client.add_adapter(req.param("replica"), id, req.param("name"));
          res = reply(ok ? 200 : 404, ok ? "added\n" : "no such replica\n");
        });
    if (crash_endpoint) {
      add("POST", "/debug/crash",
          "fault injection: ?pipeline=P&actor=emitter|scraper|decoder|ingress|debouncer|shard",
          [this](const http_request& req, http_response& res) {
            const auto who = parse_actor_kind(req.param("actor"));
            const bool ok = who && b.client.crash(req.param("pipeline"), *who);
            res = reply(ok ? 200 : 404, ok ? "crashed\n" : "no such pipeline or actor\n");
          });
    }
    add("GET", "/", "the admin page (HTML)",
        [](const http_request&, http_response& res) {
          res = reply(200, std::string(admin_page_html()), admin_page_content_type);
        },
        http_server::runs_on::io_thread);
    add("GET", "/help", "this list",
        [this](const http_request&, http_response& res) {
          std::ostringstream out;
          for (const auto& r : routes) out << r.method << ' ' << r.path << "\t" << r.help << '\n';
          res = reply(200, out.str());
        },
        http_server::runs_on::io_thread);
  }
};

admin_server::admin_server(backend b) : impl_(std::make_unique<impl>(std::move(b))) {}
admin_server::~admin_server() { stop(); }

bool admin_server::start(const config::admin_settings& s, const http_limits& limits,
                         std::string& error) {
  auto& a = *impl_;
  const auto colon = s.listen.rfind(':');
  if (colon == std::string::npos) {
    error = "admin.listen: expected host:port, got \"" + s.listen + "\"";
    return false;
  }
  std::string host = s.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = s.listen.substr(colon + 1);
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
  addrinfo_list addrs;
  if (auto err = resolve(host, port, addrs); !err.empty() || !addrs.head) {
    error = "admin.listen: cannot resolve " + s.listen + ": " + (err.empty() ? "no address" : err);
    return false;
  }
  // The check and the bind use the same resolved address: a name cannot pass as loopback and
  // then bind something else.
  const addrinfo* ai = addrs.head;
  const bool loopback = is_loopback_address(ai->ai_addr);
  if (!loopback && a.token.empty()) {
    error = "admin.listen: " + s.listen +
            " is not loopback; set admin.token_file so the port is not open to anyone";
    return false;
  }
  a.server = std::make_unique<http_server>(limits);
  a.server->set_gate([&a](const http_request& req) -> std::optional<http_response> {
    // Without a token, a connection to any other address than loopback (admin.public) gets the
    // read-only endpoints only: nothing there is a secret, and Prometheus and probes need them.
    if (!req.local_loopback && a.token.empty() && !impl::read_only(req))
      return reply(403, "forbidden: " + req.path +
                            " answers on loopback only; this address serves /healthz, /readyz, "
                            "/readyz/self and /metrics (set admin.token_file to open the rest "
                            "with a bearer token)\n");
    if (impl::guarded(req) && !a.authorized(req))
      return reply(401, "unauthorized: send 'Authorization: Bearer <token>'\n");
    return std::nullopt;
  });
  a.add_routes(s.enable_crash_endpoint);
  // admin.public: the same port on every address (the IPv6 wildcard takes IPv4 too; IPv4's
  // when the host has no IPv6), each connection told by the address it arrived at.
  const bool widen = loopback && serves_public(s.public_endpoints);
  bool bound = false;
  if (widen) {
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = ai->ai_addr->sa_family == AF_INET6
                         ? reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_port
                         : reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_port;
    std::string err6;
    bound = a.server->listen(reinterpret_cast<const sockaddr*>(&any6), sizeof any6, err6);
    a.listening = "[::]";
    if (!bound) {
      sockaddr_in any4{};
      any4.sin_family = AF_INET;
      any4.sin_addr.s_addr = htonl(INADDR_ANY);
      any4.sin_port = any6.sin6_port;
      bound = a.server->listen(reinterpret_cast<const sockaddr*>(&any4), sizeof any4, error);
      a.listening = "0.0.0.0";
    }
  } else {
    bound = a.server->listen(ai->ai_addr, static_cast<unsigned>(ai->ai_addrlen), error);
    a.listening = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  }
  if (!bound) {
    error = "admin.listen: cannot bind " + s.listen + (widen ? " on every address" : "") + ": " +
            error;
    a.server.reset();
    return false;
  }
  a.listening += ":" + std::to_string(a.server->port());
  if (widen)
    a.listening += a.token.empty()
                       ? " (every address: /healthz, /readyz, /readyz/self and /metrics; the "
                         "rest on loopback only)"
                       : " (every address; /debug/* and POSTs need the bearer token)";
  log::info("admin port listening",
            {{"listen", a.listening},
             {"max_connections", limits.max_connections},
             {"read_timeout_ms", static_cast<int64_t>(limits.read_timeout.count())},
             {"idle_timeout_ms", static_cast<int64_t>(limits.idle_timeout.count())},
             {"max_body_bytes", limits.max_body_bytes}});
  return true;
}

void admin_server::stop() {
  if (impl_->server) impl_->server->stop();
}

uint16_t admin_server::port() const { return impl_->server ? impl_->server->port() : 0; }

std::string admin_server::listening() const {
  return impl_->server ? impl_->listening : std::string("off");
}

bool in_kubernetes_pod() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  return host != nullptr && *host != '\0';
}

bool serves_public(config::admin_public p) {
  return p == config::admin_public::on || (p == config::admin_public::auto_ && in_kubernetes_pod());
}

}  // namespace kvrelay
