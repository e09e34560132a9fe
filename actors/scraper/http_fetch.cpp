#include "actors/scraper/http_fetch.hpp"

#include <httplib.h>

#include <charconv>
#include <exception>
#include <utility>

namespace kvrelay {

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

  fetch_result get(const std::string& path, const std::string& shown) {
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
      httplib::Result res = client->Get(path, on_response, on_data);
      if (too_big) {
        r.error = "GET " + shown + ": body exceeds " + std::to_string(opts.max_body) + " bytes";
      } else if (too_slow) {
        r.error = "GET " + shown + ": timed out reading the body";
      } else if (!res) {
        r.error = "GET " + shown + ": " + httplib::to_string(res.error());
      } else {
        r.ok = true;
        r.status = res->status;
        r.body = std::move(body);
      }
    } catch (const std::exception& e) {
      r.error = "GET " + shown + ": " + e.what();
    } catch (...) {
      r.error = "GET " + shown + ": unknown failure";
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
  return impl_->get(impl_->target.path, impl_->url);
}

fetch_result http_fetcher::get(std::string_view path) {
  if (!impl_) return fetch_result{false, 0, {}, "http_fetcher used after move"};
  std::string p(path);
  if (p.empty() || p.front() != '/') p.insert(p.begin(), '/');
  // The shown URL is the origin plus this path, so errors name what was actually asked.
  std::string shown = impl_->url;
  const std::size_t scheme_end = shown.find("://");
  const std::size_t path_start = scheme_end == std::string::npos
                                     ? std::string::npos
                                     : shown.find_first_of("/?#", scheme_end + 3);
  if (path_start != std::string::npos) shown.resize(path_start);
  return impl_->get(p, shown + p);
}

}  // namespace kvrelay
