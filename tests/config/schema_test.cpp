// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The schema (config/schema.cpp) is the one declaration of a setting: every key the loader reads,
// every flag, what --check prints, what a reload compares and the reference's tables come from
// its rows. These tests hold the rows to that, and docs/configuration.md to the rows.
#include "config/schema.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "config/loader.hpp"
#include "tests/config/helpers.hpp"

namespace kvrelay::config {
namespace {

using namespace testing_helpers;

std::string read_doc() {
  std::ifstream in(KVRELAY_DOCS_FILE);
  EXPECT_TRUE(in) << KVRELAY_DOCS_FILE;
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// The tables of docs/configuration.md are the schema's, byte for byte. To update them after a
// change to the rows: build the config_reference target and run
//   build/default/tests/config/config_reference --write docs/configuration.md
TEST(Docs, ReferenceTablesMatchTheSchema) {
  const std::string doc = read_doc();
  std::vector<std::string_view> blocks(schema_tables());
  blocks.push_back("flags");
  for (auto name : blocks) {
    const std::string marker = "<!-- schema: " + std::string(name) + " -->\n";
    const auto at = doc.find(marker);
    ASSERT_NE(at, std::string::npos) << "docs/configuration.md has no block for " << name;
    EXPECT_EQ(doc.find(marker, at + 1), std::string::npos) << name << " is documented twice";
  }
  const std::string expected = with_reference_tables(doc);
  EXPECT_EQ(doc, expected)
      << "docs/configuration.md and config/schema.cpp disagree; regenerate the tables with "
         "config_reference --write docs/configuration.md";
}

TEST(Docs, AChangedRowIsADifferentTable) {
  const std::string doc =
      "intro\n<!-- schema: log -->\nstale\n<!-- /schema -->\nafter\n<!-- schema: nope -->\nkept\n"
      "<!-- /schema -->\n";
  const std::string out = with_reference_tables(doc);
  EXPECT_EQ(out.find("stale"), std::string::npos) << out;
  EXPECT_NE(out.find("| `level` | `\"info\"` | `--log-level` | lowest level logged"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("after\n<!-- schema: nope -->\nkept\n<!-- /schema -->\n"), std::string::npos)
      << "an unknown block is left alone (and fails the test above)";
  EXPECT_EQ(with_reference_tables(out), out) << "regenerating is idempotent";
}

TEST(Schema, EveryRowIsDeclaredOnce) {
  std::set<std::string> keys, flags;
  for (const auto& row : schema()) {
    EXPECT_TRUE(keys.insert(row.doc_path()).second) << row.doc_path();
    EXPECT_FALSE(row.doc.empty()) << row.doc_path();
    EXPECT_NE(std::find(schema_tables().begin(), schema_tables().end(), row.table),
              schema_tables().end())
        << row.doc_path();
    if (!row.flag.empty()) {
      EXPECT_TRUE(flags.insert(std::string(row.flag)).second) << row.flag;
    }
    EXPECT_EQ(row.clamped, static_cast<bool>(row.clamp)) << row.doc_path();
  }
  for (const auto& f : command_flags()) EXPECT_TRUE(flags.insert(std::string(f.name)).second);
  // Every flag the parser knows is a row's or a command flag, and the other way round.
  const auto names = flag_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), flags);
}

// What --check prints is one line per row, defaults included: the printer walks the rows.
TEST(Schema, TheEffectiveConfigurationPrintsEveryRow) {
  daemon_config c;
  c.engines.emplace_back();
  std::istringstream printed(to_toml(c));
  std::set<std::string> seen;
  std::string table, line;
  while (std::getline(printed, line)) {
    if (line.rfind("[[engine]]", 0) == 0) table = "engine";
    else if (line.rfind("[engine.metrics]", 0) == 0) table = "engine.metrics";
    else if (line.rfind("[engine.adapters]", 0) == 0) table = "engine.adapters";
    else if (!line.empty() && line[0] == '[') table = line.substr(1, line.size() - 2);
    else if (auto eq = line.find(" = "); !line.empty() && line[0] != '#' && eq != std::string::npos)
      seen.insert(table + "." + line.substr(0, eq));
  }
  std::set<std::string> rows;
  for (const auto& row : schema()) rows.insert(row.doc_path());
  EXPECT_EQ(seen, rows);
}

// A SIGHUP applies hot rows in place; reload_diff has a field for log.level only, so a second
// hot row needs one of its own.
TEST(Schema, OnlyLogLevelIsHot) {
  std::vector<std::string> hot;
  for (const auto& row : schema())
    if (row.hot) hot.push_back(row.doc_path());
  EXPECT_EQ(hot, std::vector<std::string>{"log.level"});
  auto a = load(minimal), b = load(std::string("[log]\nlevel = \"debug\"\n") + minimal);
  const auto d = diff_for_reload(a, b);
  EXPECT_TRUE(d.log_level_changed);
  EXPECT_FALSE(d.needs_restart());
}

// A derived default is declared in its row (documented there), applied in one place, and says
// where it came from: never a silent rewrite.
TEST(Schema, DerivedDefaultIsDeclaredDocumentedAndTraced) {
  const auto* row = find_setting("server", "on_shutdown");
  ASSERT_NE(row, nullptr);
  EXPECT_NE(row->derived.find("state.dir"), std::string_view::npos);
  ASSERT_TRUE(row->derive);
  EXPECT_NE(reference_table("server").find("`\"clear\"`; `\"keep\"` with `state.dir`"),
            std::string::npos);
  auto c = load(std::string("[state]\ndir = \"/x\"\n") + minimal);
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.server.on_shutdown, shutdown_action::keep);
  EXPECT_EQ(origin_of(c, "server.on_shutdown"), "default with state.dir (t.toml:2:7)");
  EXPECT_NE(to_toml(c).find("on_shutdown = \"keep\"\n# on_shutdown: default with state.dir "
                            "(t.toml:2:7)\n"),
            std::string::npos)
      << "--check says where the value came from";
  auto plain = load(minimal);
  ASSERT_EQ(err(validate(plain)), "");
  EXPECT_EQ(plain.server.on_shutdown, shutdown_action::clear);
  EXPECT_EQ(origin_of(plain, "server.on_shutdown"), "");
}

// The rows marked discoverable are what an engine with a url learns when they are not given.
TEST(Schema, DiscoverableRowsAreWhatDiscoveryLearns) {
  engine_settings e;
  e.url = "http://127.0.0.1:8000";
  for (const auto* row : schema_table("engine"))
    EXPECT_EQ(discovered(e, row->key), row->discoverable) << row->key;
}

// A flag is parsed by its row, into its row's place, and copied only when given.
TEST(Schema, AFlagIsItsRowsParserAndPlace) {
  const auto* row = find_flag_setting("stats-interval");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->doc_path(), "engine.metrics.interval");
  daemon_config c = load(std::string(minimal) + "window = \"7ms\"\n");
  ASSERT_TRUE(apply_flags(c, flags({"--stats-interval=3s"})).ok());
  EXPECT_EQ(c.engines[0].metrics.interval, std::chrono::seconds(3));
  EXPECT_EQ(c.engines[0].window, std::chrono::milliseconds(7)) << "a flag not given copies nothing";
  EXPECT_EQ(origin_of(c, "engine[0].metrics.interval"), "--stats-interval");
}

}  // namespace
}  // namespace kvrelay::config
