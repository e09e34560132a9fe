// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The admin page (GET /) against a live daemon: served as one self-contained HTML file without
// the token, and rendered by headless Chromium (Debian `chromium`): after its scripts ran, the
// DOM shows every actor of /debug/tree with its state, a crashed and restarted emitter with its
// restart, readiness and adapters, it refreshed itself, and without the token it asks for one.
// It also writes a screenshot (admin-page.png in the build tree; docs/admin-page.png is a copy).
// Where Chromium cannot start, the Chromium tests skip and say why.
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/ops/live_daemon.hpp"

namespace kvrelay::ops {
namespace {

using std::chrono::seconds;

constexpr const char* token = "s3cret-admin-token";

// The browser's path, or "" when none is installed.
std::string find_chromium() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KVRELAY_CHROMIUM")) candidates.push_back(env);
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    candidates.push_back(c);
  for (const auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) return c;
  return {};
}

struct browser_run {
  int rc = -1;
  std::string out, err;
};

// Chromium headless on `url` with `mode` ("--dump-dom" or "--screenshot=..."), after
// `virtual_ms` of page time (timers run, fetches are waited for).
browser_run chromium(const std::string& exe, const std::string& url,
                     std::vector<std::string> mode, int virtual_ms = 3000) {
  faults::temp_dir profile;
  std::vector<std::string> args{exe, "--headless", "--no-sandbox", "--disable-gpu",
                                "--disable-quic", "--no-first-run",
                                "--disable-background-networking", "--disable-component-update",
                                "--disable-sync", "--user-data-dir=" + profile.path(),
                                "--virtual-time-budget=" + std::to_string(virtual_ms)};
  args.insert(args.end(), mode.begin(), mode.end());
  args.push_back(url);
  browser_run r;
  r.rc = run(args, seconds(120), r.out, &r.err);
  return r;
}

// Whether Chromium renders anything here (a data: URL); the reason when not.
bool chromium_starts(const std::string& exe, std::string& why) {
  const auto r = chromium(exe, "data:text/html,<p id=probe>ok</p>", {"--dump-dom"}, 0);
  if (r.out.find("id=\"probe\"") != std::string::npos) return true;
  why = exe + " does not start (exit " + std::to_string(r.rc) + "): " + r.err.substr(0, 600);
  return false;
}

std::string unescape(std::string s) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size())
      s.replace(p, from.size(), to);
  }
  return s;
}

// Every element `tag` of `dom` carrying `marker` in its class, as attribute maps.
std::vector<std::map<std::string, std::string>> elements(const std::string& dom,
                                                         const std::string& tag,
                                                         const std::string& marker) {
  std::vector<std::map<std::string, std::string>> out;
  const std::regex open("<" + tag + "\\s([^>]*)>");
  const std::regex attr("([a-z-]+)=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), open); it != std::sregex_iterator();
       ++it) {
    std::map<std::string, std::string> a;
    const std::string attrs = (*it)[1];
    for (auto j = std::sregex_iterator(attrs.begin(), attrs.end(), attr);
         j != std::sregex_iterator(); ++j)
      a[(*j)[1]] = unescape((*j)[2]);
    if (a["class"].find(marker) != std::string::npos) out.push_back(std::move(a));
  }
  return out;
}

// (pipeline, actor path as the page names it) -> (state, restarts) for every actor of the tree.
std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> tree_actors(
    const std::string& tree) {
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> out;
  const auto doc = nlohmann::json::parse(tree);
  std::function<void(const nlohmann::json&, const std::string&, const std::string&)> walk =
      [&](const nlohmann::json& n, const std::string& pipeline, const std::string& path) {
        const std::string restarts =
            n.contains("restarts") ? std::to_string(n["restarts"].get<int64_t>()) : "";
        out[{pipeline, path}] = {n.value("state", ""), restarts};
        for (const auto& c : n.value("children", nlohmann::json::array()))
          walk(c, pipeline, path.empty() ? c.value("name", "") : path + "/" + c.value("name", ""));
      };
  for (const auto& p : doc["pipelines"]) walk(p, p.value("pipeline", ""), "");
  return out;
}

struct AdminPage : ::testing::Test {
  void SetUp() override {
    d = std::make_unique<live_daemon>(live_options{token});
    ASSERT_TRUE(d->start()) << d->error();
  }
  std::unique_ptr<live_daemon> d;
};

TEST_F(AdminPage, IsOneSelfContainedHtmlFileServedWithoutTheToken) {
  const auto page = d->get("/", false);
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.body.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.body.find("<title>kvrelay admin</title>"), std::string::npos);
  // Nothing is loaded from anywhere: no src attributes, no remote links, no stylesheet links.
  EXPECT_EQ(page.body.find(" src="), std::string::npos);
  EXPECT_EQ(page.body.find("href=\"http"), std::string::npos);
  EXPECT_EQ(page.body.find("<link"), std::string::npos);
  EXPECT_NE(page.body.find("connect-src 'self'"), std::string::npos) << "the CSP keeps fetches home";
  // What it reads keeps the /debug rules.
  EXPECT_EQ(d->get("/debug/tree", false).status, 401);
  EXPECT_EQ(d->get("/debug/tree", true).status, 200);
  EXPECT_NE(d->get("/help", false).body.find("GET /\t"), std::string::npos);
}

TEST_F(AdminPage, ChromiumRendersEveryActorTheRestartReadinessAndAsksForTheToken) {
  const auto exe = find_chromium();
  if (exe.empty())
    KVRELAY_SKIP("no Chromium found (Debian package chromium; or set KVRELAY_CHROMIUM)");
  // Without the token the page asks for it and shows no actor.
  {
    const auto first = chromium(exe, d->url("/"), {"--dump-dom"}, 1500);
    if (first.out.find("<html") == std::string::npos) {
      // Nothing rendered: a browser that cannot start here is a skip, anything else a failure.
      std::string why;
      if (!chromium_starts(exe, why)) KVRELAY_SKIP("headless Chromium cannot start: " << why);
      FAIL() << "Chromium starts but rendered nothing of the page (exit " << first.rc
             << "): " << first.err.substr(0, 2000);
    }
    EXPECT_EQ(first.rc, 0) << first.err.substr(0, 2000);
    const std::string& dom = first.out;
    EXPECT_NE(dom.find("<form id=\"auth\" style=\"display: block;\">"), std::string::npos) << dom;
    EXPECT_TRUE(elements(dom, "tr", "actor").empty()) << "no actor without the token\n" << dom;
    EXPECT_NE(dom.find("token needed"), std::string::npos) << dom;
  }

  ASSERT_TRUE(d->drive()) << d->error();
  ASSERT_TRUE(d->crash_and_wait("emitter")) << d->error();
  ASSERT_TRUE(d->drive(2)) << d->error();
  const auto tree = d->get("/debug/tree");
  ASSERT_EQ(tree.status, 200);
  const auto want = tree_actors(tree.body);

  const auto page = chromium(exe, d->url("/#token=") + token, {"--dump-dom"});
  EXPECT_EQ(page.rc, 0) << page.err.substr(0, 2000);
  const std::string& dom = page.out;
  ASSERT_NE(dom.find("<body"), std::string::npos) << dom;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> got;
  for (auto& row : elements(dom, "tr", "actor"))
    got[{row["data-pipeline"], row["data-actor"]}] = {row["data-state"], row["data-restarts"]};
  EXPECT_EQ(got, want) << "every actor of /debug/tree, with its state and restarts\n"
                       << tree.body << "\n--- DOM ---\n" << dom;
  const auto emitter = got.find({d->pipeline(), "emitter"});
  ASSERT_NE(emitter, got.end()) << dom;
  EXPECT_EQ(emitter->second.first, "running");
  EXPECT_GE(std::atoi(emitter->second.second.c_str()), 1) << "the crash shows as a restart";

  // Readiness, adapters and rates per pipeline.
  auto cards = elements(dom, "div", "pipeline-card");
  ASSERT_EQ(cards.size(), 1u) << dom;
  EXPECT_EQ(cards[0]["data-pipeline"], d->pipeline());
  EXPECT_NE(dom.find("data-ready=\"true\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("data-adapter=\"sql-lora\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("data-rate=\"events\""), std::string::npos) << dom;
  // The first render says the rates are being measured; the second sample follows a second
  // later, not a refresh interval (2 s) later: within 1.5 s of page time there are rates.
  {
    const auto early = chromium(exe, d->url("/#token=") + token, {"--dump-dom"}, 1500);
    std::smatch cell;
    ASSERT_TRUE(std::regex_search(
        early.out, cell, std::regex("data-rate=\"events\"><span class=\"k\">events</span><span "
                                    "class=\"v\">([^<]*)</span>")))
        << early.out;
    EXPECT_TRUE(std::regex_match(cell[1].str(), std::regex("[0-9.]+/s"))) << cell[1];
  }
  // It refreshed itself (every 2 s; Chromium ran 3 s of page time: at 0 and at 2 s).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("<body data-refreshes=\"(\\d+)\"")));
  EXPECT_GE(std::stoi(m[1]), 2) << "refreshes";
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("<div id=\"error\"[^>]*>([^<]*)</div>")));
  EXPECT_EQ(m[1], "") << "the page's error line";

  // The screenshot docs/operations.md shows.
  const std::string png = KVRELAY_BINARY_DIR "/admin-page.png";
  std::remove(png.c_str());
  // Traffic while Chromium runs, so the rates in the picture move (Chromium on its own thread;
  // the harness stays on this one).
  auto shot = std::async(std::launch::async, [&] {
    return chromium(exe, d->url("/#token=") + token,
                    {"--hide-scrollbars", "--window-size=1280,900", "--screenshot=" + png});
  });
  while (shot.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready)
    ASSERT_TRUE(d->drive(1)) << d->error();
  const auto shot_run = shot.get();
  EXPECT_EQ(shot_run.rc, 0) << shot_run.err.substr(0, 2000);
  const auto bytes = faults::read_file(png);
  ASSERT_GT(bytes.size(), 8u) << "no screenshot at " << png;
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  std::cout << "screenshot: " << png << " (" << bytes.size() << " bytes)" << std::endl;
}

}  // namespace
}  // namespace kvrelay::ops
