#pragma once
// The flags of `vela serve`, grouped by topic: the one table its parser accepts and its --help
// lists, so the two cannot drift apart.
// Free function; no state.
#include "cli_args.h"

namespace vela::cli {

// The parser of `vela serve`, every flag declared under its group's heading.
Args serve_args();

}  // namespace vela::cli
