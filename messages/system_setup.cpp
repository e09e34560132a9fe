#include "messages/system_setup.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/message.hpp>

#include <string>

#include "messages/fwd.hpp"

namespace kvrelay {

void setup_actor_system(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::kvrelay>();
  // add_error_category<ec>(atom) does not compile in 0.17.6: register the renderer overload.
  cfg.add_error_category(caf::atom("kvrelay"),
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = to_string(static_cast<ec>(code));
                           if (!ctx.empty()) out += ": " + caf::to_string(ctx);
                           return out;
                         });
  // Never write CAF's actor_log files into the working directory.
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
}

}  // namespace kvrelay
