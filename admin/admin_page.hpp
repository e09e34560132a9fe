// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// GET / on the admin port: kvrelay's admin page, one self-contained HTML file
// (admin/admin_page.html: inline CSS and JS, no external assets, no build step of its own)
// compiled into the binary. It shows the supervision tree, per-pipeline rates, lag and backlog,
// readiness reasons and adapters, all fetched by the page itself from /debug/tree, /metrics and
// /readyz, and refreshes every 2 s. The page carries nothing about the daemon, so it is served
// without the token like /help; its own /debug/* requests send the token (asked for once, kept
// in the tab's sessionStorage) and get 401 without it, like any other client.

#include <string_view>

namespace kvrelay {

/// The page (UTF-8 HTML). Static storage: serve it without copying.
std::string_view admin_page_html();

inline constexpr const char* admin_page_content_type = "text/html; charset=utf-8";

}  // namespace kvrelay
