// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The configuration reaches the pipeline's options: settings whose only effect is inside an
// actor's protocol, checked where the daemon hands them over.
#include <gtest/gtest.h>

#include "config/loader.hpp"
#include "config/settings.hpp"
#include "daemon/pipeline_setup.hpp"
#include "tests/config/helpers.hpp"

namespace kvrelay {
namespace {

pipeline_options options_for(const std::string& toml) {
  const config::daemon_config cfg = config::testing_helpers::load(toml);
  return to_pipeline_options(cfg, config::pipelines(cfg).front(), {});
}

TEST(PipelineSetup, ReplayWaitWindowsReachesTheDebouncer) {  // DB19
  const std::string engine = config::testing_helpers::minimal;
  EXPECT_EQ(options_for(engine).debouncer.protocol.history_windows, 10u);
  EXPECT_EQ(options_for("[server]\nreplay_wait_windows = 0\n" + engine)
                .debouncer.protocol.history_windows,
            0u);
  EXPECT_EQ(options_for("[server]\nreplay_wait_windows = 3\n" + engine)
                .debouncer.protocol.history_windows,
            3u);
}

}  // namespace
}  // namespace kvrelay
