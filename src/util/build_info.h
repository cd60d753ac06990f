#pragma once
// This build's identity: the project's version and the source commit it was built from
// ("unknown" outside a git checkout). Ranks of a parallel job compare it; `vela --version`
// prints it. Thread-safety: constants.

namespace vela {

const char* vela_version();   // e.g. "0.1.0"
const char* vela_build_id();  // e.g. "0.1.0+3f2a9c1d0b7e"

}  // namespace vela
