#include "actors/scraper/http_fetch.hpp"

#include <httplib.h>

#include <charconv>
#include <exception>
#include <utility>

namespace kvrelay {

std::optional<http_url> parse_http_url(std::string_view url, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<http_url> {
    if (error) *error = "invalid metrics URL \"" + std::string(url) + "\": " + std::move(why);
    return std::nullopt;
  };
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) return fail("want http://host:port/path");
  std::string_view rest = url.substr(kScheme.size());
  std::size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) return fail("credentials are not supported");

  http_url out;
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail("unterminated IPv6 literal");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail("junk after IPv6 literal");
      port_text = after.substr(1);
      if (port_text.empty()) return fail("empty port");
    }
  } else {
    std::size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return fail("empty port");
    }
  }
  if (out.host.empty()) return fail("empty host");
  if (!port_text.empty()) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), v);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || v == 0 || v > 65535)
      return fail("bad port \"" + std::string(port_text) + "\"");
    out.port = static_cast<std::uint16_t>(v);
  }
  std::size_t hash = path.find('#');  // fragments never go on the wire
  if (hash != std::string_view::npos) path = path.substr(0, hash);
  out.path = path.empty() ? "/" : (path.front() == '/' ? std::string(path) : "/" + std::string(path));
  return out;
}

struct http_fetcher::impl {
  std::string url;
  http_fetch_options opts;
  std::string url_error;
  http_url target;
  std::unique_ptr<httplib::Client> client;  // holds the kept-alive connection

  void make_client() {
    client = std::make_unique<httplib::Client>(target.host, target.port);
    client->set_keep_alive(true);
    client->set_connection_timeout(opts.timeout);
    client->set_read_timeout(opts.timeout);
    client->set_write_timeout(opts.timeout);
    // No proxy, no redirects: /metrics is a local engine endpoint, and following a redirect
    // elsewhere would scrape something that is not this engine.
    client->set_follow_location(false);
  }

  fetch_result get() {
    fetch_result r;
    if (!url_error.empty()) {
      r.error = url_error;
      return r;
    }
    if (!client) make_client();
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + opts.timeout;
    bool too_big = false;
    bool too_slow = false;
    std::string body;
    auto on_response = [&](const httplib::Response& res) {
      // Refuse early when the server announces a body over the cap.
      if (res.has_header("Content-Length")) {
        const std::string& cl = res.get_header_value("Content-Length");
        unsigned long long n = 0;
        auto [p, ec] = std::from_chars(cl.data(), cl.data() + cl.size(), n);
        if (ec == std::errc() && p == cl.data() + cl.size() && n > opts.max_body) {
          too_big = true;
          return false;
        }
      }
      return true;
    };
    // The read timeout bounds each recv; this bounds the whole body against a slow drip.
    auto on_data = [&](const char* data, std::size_t len) {
      if (len > opts.max_body - body.size()) {
        too_big = true;
        return false;
      }
      if (clock::now() > deadline) {
        too_slow = true;
        return false;
      }
      body.append(data, len);
      return true;
    };
    try {
      httplib::Result res = client->Get(target.path, on_response, on_data);
      if (too_big) {
        r.error = "GET " + url + ": body exceeds " + std::to_string(opts.max_body) + " bytes";
      } else if (too_slow) {
        r.error = "GET " + url + ": timed out reading the body";
      } else if (!res) {
        r.error = "GET " + url + ": " + httplib::to_string(res.error());
      } else {
        r.ok = true;
        r.status = res->status;
        r.body = std::move(body);
      }
    } catch (const std::exception& e) {
      r.error = "GET " + url + ": " + e.what();
    } catch (...) {
      r.error = "GET " + url + ": unknown failure";
    }
    // After an aborted transfer the connection state is unknown: start clean next time.
    if (!r.ok) client.reset();
    return r;
  }
};

http_fetcher::http_fetcher(std::string url, http_fetch_options opts) : impl_(new impl) {
  impl_->url = std::move(url);
  impl_->opts = opts;
  if (impl_->opts.timeout.count() <= 0) impl_->opts.timeout = std::chrono::milliseconds(5000);
  if (auto t = parse_http_url(impl_->url, &impl_->url_error)) impl_->target = std::move(*t);
}

http_fetcher::~http_fetcher() = default;
http_fetcher::http_fetcher(http_fetcher&&) noexcept = default;
http_fetcher& http_fetcher::operator=(http_fetcher&&) noexcept = default;

const std::string& http_fetcher::url_error() const { return impl_->url_error; }
const std::string& http_fetcher::url() const { return impl_->url; }

fetch_result http_fetcher::get() {
  if (!impl_) return fetch_result{false, 0, {}, "http_fetcher used after move"};
  return impl_->get();
}

}  // namespace kvrelay
